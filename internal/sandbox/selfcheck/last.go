package selfcheck

import (
	"sync"

	"github.com/sandhold/sandhold/internal/agent"
)

// Last keeps the isolation layers the most recent init reported (the
// security report's, between self-tests); its zero value holds none.
type Last struct {
	// mu guards layers.
	mu     sync.Mutex
	layers []agent.Layer
}

// Note keeps the layers an init reported.
func (l *Last) Note(layers []agent.Layer) {
	l.mu.Lock()
	l.layers = layers
	l.mu.Unlock()
}

// Get is a copy of the layers last noted.
func (l *Last) Get() []agent.Layer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.Layer(nil), l.layers...)
}
