package volume

// Clock times the steps of one init start (package sandbox's step clock):
// Mark ends the step under way, naming it. A nil Clock records nothing.
type Clock interface{ Mark(step string) }

// mark is clk.Mark where there is a clock.
func mark(clk Clock, step string) {
	if clk != nil {
		clk.Mark(step)
	}
}
