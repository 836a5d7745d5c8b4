package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/fault"
)

// TestBodyBudget: a key holds at most its share, all keys at most the
// whole; what is answered is given back.
func TestBodyBudget(t *testing.T) {
	b := newBodyBudget(400, 50) // a key's share: 100
	r1, err := b.take("a", 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.take("a", 60); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("past the key's share: %v", err)
	}
	var held []func()
	for _, k := range []string{"b", "c", "d"} {
		r, err := b.take(k, 100)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	if _, err := b.take("e", 50); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("past the whole: %v", err)
	}
	r1()
	r1() // once
	if _, err := b.take("e", 50); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if b.used != 350 || b.byKey["a"] != 0 {
		t.Fatalf("used %d, a %d", b.used, b.byKey["a"])
	}
	for _, r := range held {
		r()
	}
}

// TestBodyBudgetRefusesBeforeReading: the requests of one key that would
// hold more than its share are refused before a byte of their bodies is
// read; the rest of the server is not.
func TestBodyBudgetRefusesBeforeReading(t *testing.T) {
	s := &Server{cfg: config.Config{MaxBody: 1 << 20, BodyBudget: 8 << 20}}
	s.bodies = newBodyBudget(s.cfg.BodyBudget.Bytes(), s.cfg.MaxBody.Bytes())
	inside := make(chan struct{})
	hold := make(chan struct{})
	h := s.bodyBudgetMiddleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-hold
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	req := func(key string, n int) *http.Request {
		r := httptest.NewRequest("POST", "/v1/file/write", strings.NewReader(strings.Repeat("x", n)))
		return r.WithContext(auth.WithCaller(context.Background(), auth.Caller{KeyID: key, Role: auth.RoleAgent}))
	}
	var wg sync.WaitGroup
	// Two bodies of 1 MiB fill key a's share (2 MiB).
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); h.ServeHTTP(httptest.NewRecorder(), req("a", 1<<20)) }()
		<-inside
	}
	read := &countReader{r: strings.NewReader(strings.Repeat("x", 1<<20))}
	third := httptest.NewRequest("POST", "/v1/file/write", read)
	third = third.WithContext(auth.WithCaller(context.Background(), auth.Caller{KeyID: "a", Role: auth.RoleAgent}))
	third.ContentLength = 1 << 20
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, third)
	if rec.Code != http.StatusTooManyRequests || read.n != 0 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("third body of key a: %d, %d bytes read", rec.Code, read.n)
	}
	// Another key is served meanwhile.
	wg.Add(1)
	go func() { defer wg.Done(); h.ServeHTTP(httptest.NewRecorder(), req("b", 1<<20)) }()
	<-inside
	close(hold)
	wg.Wait()
	if s.bodies.used != 0 {
		t.Fatalf("%d bytes still held after every answer", s.bodies.used)
	}
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
