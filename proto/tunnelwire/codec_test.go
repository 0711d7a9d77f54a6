package tunnelwire

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// The codec's frames are what the protobuf codec makes of them, both ways, and other messages go to it.
func TestCodecRoundTrip(t *testing.T) {
	for _, f := range []*agentv1.TunnelFrame{
		{}, {TunnelId: "abc"}, {Data: bytes.Repeat([]byte{7}, FrameSize)}, {TunnelId: "x", Data: []byte("y"), Error: "no route"},
	} {
		data, err := Codec.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("Marshal(%v) = %x, want %x", f, got, want)
		}
		var back agentv1.TunnelFrame
		if err := Codec.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		data.Free()
		if !proto.Equal(&back, f) {
			t.Errorf("round trip of %v: %v", f, &back)
		}
	}
	other := &agentv1.OpenTunnel{TunnelId: "t", Target: &agentv1.TunnelTarget{Kind: agentv1.TunnelTarget_KIND_SEED_API_SERVER}}
	data, err := Codec.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	var back agentv1.OpenTunnel
	if err := Codec.Unmarshal(data, &back); err != nil || !proto.Equal(&back, other) {
		t.Errorf("OpenTunnel round trip: %v, %v", &back, err)
	}
}

// FuzzUnmarshalFrame: frames come from agents. The decoder never panics, and where protobuf accepts the bytes it
// decodes the same frame (it refuses invalid UTF-8 in strings, which the decoder lets through as unmatched ids).
func FuzzUnmarshalFrame(f *testing.F) {
	for _, fr := range []*agentv1.TunnelFrame{{TunnelId: "abc", Data: []byte("data")}, {Error: "e"}} {
		b, _ := proto.Marshal(fr)
		f.Add(b)
	}
	f.Add([]byte{0x12, 0xff})
	f.Add([]byte{0x08, 0x01, 0x12, 0x01, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got agentv1.TunnelFrame
		err := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bytes.Clone(b))}, &got)
		var want agentv1.TunnelFrame
		if proto.Unmarshal(b, &want) != nil {
			return
		}
		if err != nil {
			t.Fatalf("protobuf decodes %x, the codec does not: %v", b, err)
		}
		if got.GetTunnelId() != want.GetTunnelId() || !bytes.Equal(got.GetData(), want.GetData()) || got.GetError() != want.GetError() {
			t.Fatalf("%x: codec %v, protobuf %v", b, &got, &want)
		}
	})
}
