package tunnelwire

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
)

// A data connection carries one passthrough tunnel's bytes outside the agent link's encrypted connection
// (docs/tunnels.md): the agent connects to the hub's agent port and writes the data preface, naming the tunnel and the
// single-use token the hub gave it over the session; the hub answers DataAccepted and both sides then copy the
// tunnel's bytes as they are. A refused preface is answered by closing the connection.
const (
	// DataPrefaceMagic begins every data preface. Its first byte is not a TLS record's (0x16), so the hub's agent port
	// tells data connections from TLS ones by their first byte.
	DataPrefaceMagic = "TRELLIS-TUNNEL-DATA/1 "
	// TunnelIDLen is the length of a tunnel id (hex of 16 random bytes).
	TunnelIDLen = 32
	// DataTokenLen is the length of a data token: 32 random bytes (256 bits).
	DataTokenLen = 32
	// DataPrefaceLen is the data preface's fixed length: magic, id, a space, the token in hex, a newline. A fixed
	// length lets the hub read exactly the preface and leave the connection's later bytes unread in the socket.
	DataPrefaceLen = len(DataPrefaceMagic) + TunnelIDLen + 1 + 2*DataTokenLen + 1
	// DataAccepted is the hub's answer to an accepted preface.
	DataAccepted = "OK\n"
)

// DataPreface returns the preface of a data connection for tunnel id with token.
func DataPreface(id string, token []byte) ([]byte, error) {
	if err := checkTunnelID(id); err != nil {
		return nil, err
	}
	if len(token) != DataTokenLen {
		return nil, fmt.Errorf("data token: %d bytes, want %d", len(token), DataTokenLen)
	}
	b := make([]byte, 0, DataPrefaceLen)
	b = append(b, DataPrefaceMagic...)
	b = append(b, id...)
	b = append(b, ' ')
	b = hex.AppendEncode(b, token)
	return append(b, '\n'), nil
}

// ParseDataPreface parses a data preface (exactly DataPrefaceLen bytes) into its tunnel id and token.
func ParseDataPreface(b []byte) (id string, token []byte, err error) {
	if len(b) != DataPrefaceLen {
		return "", nil, fmt.Errorf("data preface: %d bytes, want %d", len(b), DataPrefaceLen)
	}
	if string(b[:len(DataPrefaceMagic)]) != DataPrefaceMagic {
		return "", nil, errors.New("data preface: wrong magic")
	}
	b = b[len(DataPrefaceMagic):]
	id = string(b[:TunnelIDLen])
	if err := checkTunnelID(id); err != nil {
		return "", nil, fmt.Errorf("data preface: %w", err)
	}
	b = b[TunnelIDLen:]
	if b[0] != ' ' || b[len(b)-1] != '\n' {
		return "", nil, errors.New("data preface: malformed")
	}
	hexToken := b[1 : len(b)-1]
	if !lowerHex(string(hexToken)) {
		return "", nil, errors.New("data preface: token: not lower-case hex")
	}
	token = make([]byte, DataTokenLen)
	if _, err := hex.Decode(token, hexToken); err != nil {
		return "", nil, fmt.Errorf("data preface: token: %w", err)
	}
	return id, token, nil
}

// checkTunnelID accepts TunnelIDLen lower-case hex digits.
func checkTunnelID(id string) error {
	if len(id) != TunnelIDLen {
		return fmt.Errorf("tunnel id: %d characters, want %d", len(id), TunnelIDLen)
	}
	if !lowerHex(id) {
		return errors.New("tunnel id: not lower-case hex")
	}
	return nil
}

// lowerHex says whether s is lower-case hex digits only.
func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ReadDataPreface reads exactly one data preface from c, nothing after it.
func ReadDataPreface(c net.Conn) (id string, token []byte, err error) {
	b := make([]byte, DataPrefaceLen)
	if _, err := io.ReadFull(c, b); err != nil {
		return "", nil, fmt.Errorf("data preface: %w", err)
	}
	return ParseDataPreface(b)
}
