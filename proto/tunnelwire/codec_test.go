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

// A full frame is one message of 64 KiB: four full HTTP/2 DATA frames, and a buffer of BufferPool's 64 KiB tier.
func TestFullFrameSize(t *testing.T) {
	data, err := Codec.Marshal(&agentv1.TunnelFrame{Data: make([]byte, FrameSize)})
	if err != nil {
		t.Fatal(err)
	}
	defer data.Free()
	if got := 5 + data.Len(); got != 64<<10 {
		t.Errorf("a full frame's message is %d bytes with gRPC's prefix, want %d", got, 64<<10)
	}
}

// FuzzUnmarshalFrame: frames come from agents, in as many of gRPC's buffers as HTTP/2 frames carried them (split
// at the fuzzer's offsets). The decoder never panics, and where protobuf accepts the bytes it decodes the same frame
// (it refuses invalid UTF-8 in strings, which the decoder lets through as unmatched ids).
func FuzzUnmarshalFrame(f *testing.F) {
	for _, fr := range []*agentv1.TunnelFrame{{TunnelId: "abc", Data: []byte("data")}, {Error: "e"}} {
		b, _ := proto.Marshal(fr)
		f.Add(b, uint16(3), uint16(1))
	}
	big, _ := proto.Marshal(&agentv1.TunnelFrame{Data: bytes.Repeat([]byte{1}, FrameSize)})
	f.Add(big, uint16(16384), uint16(16384))
	f.Add([]byte{0x12, 0xff}, uint16(1), uint16(0))
	f.Add([]byte{0x08, 0x01, 0x12, 0x01, 'x'}, uint16(0), uint16(0))
	f.Add([]byte{0x0b, 0x0c, 0x12, 0x01, 'x'}, uint16(2), uint16(0)) // a group: the careful parser
	f.Fuzz(func(t *testing.T, b []byte, cut1, cut2 uint16) {
		var bufs mem.BufferSlice
		rest := bytes.Clone(b)
		for _, c := range []int{int(cut1), int(cut2)} {
			c = min(c, len(rest))
			bufs, rest = append(bufs, mem.SliceBuffer(rest[:c])), rest[c:]
		}
		bufs = append(bufs, mem.SliceBuffer(rest))
		var got agentv1.TunnelFrame
		err := Codec.Unmarshal(bufs, &got)
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
		Release(got.Data)
	})
}
