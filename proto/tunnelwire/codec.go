package tunnelwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// Codec is the agent link's gRPC codec (grpc.ForceServerCodecV2, grpc.ForceCodecV2): the protobuf codec, but for
// TunnelFrames, which it encodes into buffers of BufferPool (not zeroed) and decodes with one copy straight from
// gRPC's buffers into a frame buffer of its own pool: Data then holds a buffer that its reader gives back with
// Release once it has written the bytes. gRPC's codec zeroes a pooled buffer for each frame, gathers the frame and
// copies it again into a newly allocated slice: at 100 MB/s that was 100 MB/s of garbage.
var Codec encoding.CodecV2 = codec{}

type codec struct{}

// Name is the protobuf codec's: the content type does not change.
func (codec) Name() string { return grpcproto.Name }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*agentv1.TunnelFrame)
	if !ok {
		return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
	}
	size := proto.Size(f)
	bp := BufferPool.Get(size)
	if _, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend((*bp)[:0], f); err != nil {
		BufferPool.Put(bp)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(bp, BufferPool)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*agentv1.TunnelFrame)
	if !ok {
		return encoding.GetCodecV2(grpcproto.Name).Unmarshal(data, v)
	}
	r := frameReader{bufs: data}
	err := r.frame(f)
	if errors.Is(err, errSlowPath) {
		// Groups and malformed input: the careful parser on the gathered bytes decides.
		Release(f.Data)
		return unmarshalFrame(data.Materialize(), f)
	}
	if err != nil {
		Release(f.Data)
		f.Data = nil
	}
	return err
}

// Release gives the buffer of a received frame's Data back once its bytes have been written; b must not be used
// afterwards. Any other slice is left alone (the garbage collector takes it), so Release(f.Data) is always allowed
// once, on a frame the Codec decoded.
func Release(b []byte) {
	if cap(b) == FrameSize {
		frameBufs.Put((*[FrameSize]byte)(b[:FrameSize]))
	}
}

// errSlowPath sends a frame to unmarshalFrame: a field the streaming decoder does not skip (a group) or bytes that it
// does not judge itself.
var errSlowPath = errors.New("tunnel frame: slow path")

// frameReader decodes a TunnelFrame from gRPC's buffers as they are, without gathering them first.
type frameReader struct {
	bufs mem.BufferSlice
	cur  []byte
}

func (r *frameReader) next() bool {
	for len(r.cur) == 0 {
		if len(r.bufs) == 0 {
			return false
		}
		r.cur, r.bufs = r.bufs[0].ReadOnlyData(), r.bufs[1:]
	}
	return true
}

func (r *frameReader) ReadByte() (byte, error) {
	if !r.next() {
		return 0, io.ErrUnexpectedEOF
	}
	b := r.cur[0]
	r.cur = r.cur[1:]
	return b, nil
}

// remaining is how many bytes are left.
func (r *frameReader) remaining() int {
	n := len(r.cur)
	for _, b := range r.bufs {
		n += b.Len()
	}
	return n
}

// read fills p, or fails when fewer bytes are left.
func (r *frameReader) read(p []byte) error {
	for len(p) > 0 {
		if !r.next() {
			return io.ErrUnexpectedEOF
		}
		n := copy(p, r.cur)
		p, r.cur = p[n:], r.cur[n:]
	}
	return nil
}

// skip drops n bytes, or fails when fewer are left.
func (r *frameReader) skip(n uint64) error {
	for n > 0 {
		if !r.next() {
			return io.ErrUnexpectedEOF
		}
		m := min(n, uint64(len(r.cur)))
		r.cur, n = r.cur[m:], n-m
	}
	return nil
}

// frame decodes the frame into f (which it resets): Data in a buffer of frameBufs when it fits one. Anything but
// well-formed fields of the varint, fixed and bytes types is errSlowPath.
func (r *frameReader) frame(f *agentv1.TunnelFrame) error {
	f.Reset()
	left := r.remaining()
	for r.next() {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return errSlowPath
		}
		num, typ := protowire.DecodeTag(tag)
		if num < protowire.MinValidNumber {
			return errSlowPath
		}
		switch typ {
		case protowire.VarintType:
			if _, err := binary.ReadUvarint(r); err != nil {
				return errSlowPath
			}
			continue // unknown fields are skipped, as proto.Unmarshal keeps them for nobody here
		case protowire.Fixed32Type:
			if r.skip(4) != nil {
				return errSlowPath
			}
			continue
		case protowire.Fixed64Type:
			if r.skip(8) != nil {
				return errSlowPath
			}
			continue
		case protowire.BytesType:
		default:
			return errSlowPath
		}
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(left) {
			return errSlowPath
		}
		if num < 1 || num > 3 {
			if r.skip(n) != nil {
				return errSlowPath
			}
			continue
		}
		var val []byte
		switch {
		case num == 2 && n > 0 && n <= FrameSize:
			val = frameBufs.Get().(*[FrameSize]byte)[:n]
		default:
			val = make([]byte, n)
		}
		if err := r.read(val); err != nil {
			Release(val)
			return errSlowPath
		}
		switch num {
		case 1:
			f.TunnelId = string(val)
		case 2:
			Release(f.Data) // the last occurrence wins, as in protobuf
			f.Data = val
		case 3:
			f.Error = string(val)
		}
	}
	return nil
}

// unmarshalFrame decodes b into f; f.Data aliases b.
func unmarshalFrame(b []byte, f *agentv1.TunnelFrame) error {
	f.Reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("tunnel frame: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType || num < 1 || num > 3 {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("tunnel frame: field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:] // unknown fields are skipped, as proto.Unmarshal keeps them for nobody here
			continue
		}
		val, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("tunnel frame: field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			f.TunnelId = string(val)
		case 2:
			f.Data = val[:len(val):len(val)]
		case 3:
			f.Error = string(val)
		}
	}
	return nil
}
