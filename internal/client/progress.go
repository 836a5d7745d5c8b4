package client

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// Progress drawing, with the reasons for its numbers.
const (
	// redrawEvery bounds how often a terminal bar is redrawn: faster is
	// flicker and CPU, slower looks stuck.
	redrawEvery = 100 * time.Millisecond
	// plainStep is the share of the total between two plain lines (logs
	// and pipes get 20 lines per copy, not thousands).
	plainStep = 5
	// barWidth is the bar's width in cells.
	barWidth = 24
)

// Progress reports a copy's bytes, rate and ETA: a bar redrawn in place
// on a terminal, else a plain line each plainStep percent (and at the
// end), each starting with "progress" and the byte counts.
type Progress struct {
	w     io.Writer
	tty   bool
	label string
	total int64
	now   func() time.Time

	mu sync.Mutex
	// guarded by mu:
	done      int64     // bytes so far, including resumed ones
	base      int64     // bytes there before this run (not counted in the rate)
	start     time.Time // when this run began
	lastDraw  time.Time
	lastStep  int64 // last plain step printed
	lastDone  int64 // bytes at the last plain line
	finished  bool
	lastWidth int
}

// NewProgress reports to w a copy of total bytes of which resumed were
// done before; tty draws a bar in place.
func NewProgress(w io.Writer, tty bool, label string, total, resumed int64) *Progress {
	p := &Progress{w: w, tty: tty, label: label, total: total, now: time.Now, done: resumed, base: resumed, lastStep: -1}
	p.start = p.now()
	p.mu.Lock()
	p.draw(true)
	p.mu.Unlock()
	return p
}

// Add counts n more bytes.
func (p *Progress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.draw(false)
}

// Set sets the count (after the server said where it stands).
func (p *Progress) Set(done int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if done < p.base {
		p.base = done
	}
	p.draw(false)
}

// Finish draws the final state and ends the bar's line.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.draw(true)
	p.finished = true
	if p.tty {
		_, _ = io.WriteString(p.w, "\n")
	}
}

// draw prints the state if due (force: always). Lock held.
func (p *Progress) draw(force bool) {
	if p.finished {
		return
	}
	now := p.now()
	pct := int64(100)
	if p.total > 0 {
		pct = p.done * 100 / p.total
	}
	if p.tty {
		if !force && now.Sub(p.lastDraw) < redrawEvery {
			return
		}
		p.lastDraw = now
		line := p.render(now, pct, true)
		pad := ""
		if n := p.lastWidth - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		p.lastWidth = len(line)
		_, _ = io.WriteString(p.w, "\r"+line+pad)
		return
	}
	step := pct / plainStep
	if step == p.lastStep && (!force || p.done == p.lastDone) {
		return
	}
	p.lastStep, p.lastDone = step, p.done
	_, _ = io.WriteString(p.w, p.render(now, pct, false)+"\n")
}

func (p *Progress) render(now time.Time, pct int64, bar bool) string {
	elapsed := now.Sub(p.start)
	var rate float64
	if elapsed > 0 {
		rate = float64(p.done-p.base) / elapsed.Seconds()
	}
	eta := "--"
	switch {
	case p.total <= p.done:
		eta = "0s"
	case rate > 0:
		d := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
		if d < time.Second {
			eta = "<1s"
		} else {
			eta = d.Round(time.Second).String()
		}
	}
	if bar {
		filled := int(pct * barWidth / 100)
		filled = min(max(filled, 0), barWidth)
		b := strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled)
		return fmt.Sprintf("%s [%s] %3d%% %s/%s %s/s ETA %s", p.label, b, pct, IBytes(p.done), IBytes(p.total), IBytes(int64(rate)), eta)
	}
	return fmt.Sprintf("progress %d/%d bytes %d%% %s %s/s ETA %s", p.done, p.total, pct, p.label, IBytes(int64(rate)), eta)
}

// IBytes writes a byte count as 1.5 MiB (negative counts as 0).
func IBytes(n int64) string {
	if n < 0 {
		n = 0
	}
	return humanize.IBytes(uint64(n)) // #nosec G115 -- n is not negative here
}
