package warmpool

import (
	"errors"
	"fmt"

	"github.com/sandhold/sandhold/internal/template"
)

// TemplateRef is the template a pool of name makes its sandboxes from now
// (Config.Resolve): for a template pool, what its name names now in st
// ("" for the host's). Only a public template (an admin's) has a pool.
func TemplateRef(st *template.Store, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	if st == nil {
		return "", errors.New("this server keeps no templates")
	}
	t, err := st.Resolve(template.Caller{Admin: true}, name)
	if err != nil {
		return "", err
	}
	if t.Owner != "" {
		return "", fmt.Errorf("template %s is not public (an admin's): no pool for it", name)
	}
	return t.Ref(), nil
}
