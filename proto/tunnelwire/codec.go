package tunnelwire

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// Codec is the agent link's gRPC codec (grpc.ForceServerCodecV2, grpc.ForceCodecV2): the protobuf codec, but for
// TunnelFrames, which it encodes into buffers of BufferPool (not zeroed) and decodes with one copy, Data aliasing the
// frame's own buffer. gRPC's codec zeroes a pooled buffer for each frame and copies the bytes twice.
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
	b := make([]byte, data.Len())
	data.CopyTo(b)
	return unmarshalFrame(b, f)
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
