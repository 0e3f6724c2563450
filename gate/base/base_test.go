package base

import (
	"context"
	"testing"
)

func TestBookwormThroughAPTLine(t *testing.T) {
	src, err := Parse(aptSource(t), "")
	if err != nil {
		t.Fatal(err)
	}
	l := &Loader{Cache: testCache(t)}
	pkgs, err := l.Load(context.Background(), src, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 60000 {
		t.Fatalf("bookworm main amd64 has %d packages", len(pkgs))
	}
}
