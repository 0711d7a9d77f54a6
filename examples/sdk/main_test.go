package main

import (
	"context"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

func TestCreateProjectAndShoot(t *testing.T) {
	h := hubtest.Start(t)
	// The hub admits the shoot's extension types once a ControllerRegistration registers them, as provider-local's
	// does in `make up`'s landscape (the machine image "local" is its OperatingSystemConfig type).
	h.RegisterExtensions(t, "provider-local", hubtest.LocalExtensions()...)
	conn, err := Dial(h.Addr(), h.CA, h.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 2 { // the second run reuses what exists
		s, err := CreateProjectAndShoot(context.Background(), conn, "sdk", "hello")
		if err != nil {
			t.Fatal(err)
		}
		if s.GetSpec().GetKubernetes().GetVersion() != "1.35.4" || s.GetMetadata().GetGeneration() != 1 {
			t.Fatalf("unexpected shoot: %v", s)
		}
	}
	if _, err := Dial(h.Addr(), h.CA, "wrong"); err != nil {
		t.Fatal(err)
	}
	bad, _ := Dial(h.Addr(), h.CA, "wrong")
	defer bad.Close()
	if _, err := CreateProjectAndShoot(context.Background(), bad, "sdk2", "x"); err == nil {
		t.Fatal("a wrong token was accepted")
	}
}
