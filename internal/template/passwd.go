package template

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template/layer"
)

// maxPasswd caps /etc/passwd and /etc/group read from a template.
const maxPasswd = 4 << 20

// ResolveUser resolves an image's USER ("name", "uid", "name:group",
// "uid:gid") against the /etc/passwd and /etc/group of the template whose
// layers are given (lowest first). "" is root (0:0). The ids must be in
// the range a sandbox maps.
func (s *Store) ResolveUser(layers []Layer, user string) (uid, gid int, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	uid, gid = -1, -1
	if n, err := strconv.Atoi(u); err == nil {
		uid, gid = n, 0
	}
	if uid < 0 || !hasGroup {
		passwd, err := s.ReadFile(layers, "etc/passwd", maxPasswd)
		if err == nil {
			if puid, pgid, ok := lookup(passwd, u, uid); ok {
				uid, gid = puid, pgid
			}
		}
		if uid < 0 {
			return 0, 0, fault.InvalidField("user", fmt.Sprintf("user %q is not in the template's /etc/passwd", u))
		}
	}
	if hasGroup {
		if n, err := strconv.Atoi(g); err == nil {
			gid = n
		} else {
			group, err := s.ReadFile(layers, "etc/group", maxPasswd)
			ggid := -1
			if err == nil {
				ggid, _, _ = lookup(group, g, -1)
			}
			if ggid < 0 {
				return 0, 0, fault.InvalidField("user", fmt.Sprintf("group %q is not in the template's /etc/group", g))
			}
			gid = ggid
		}
	}
	if uid < 0 || uid >= layer.IDRange || gid < 0 || gid >= layer.IDRange {
		return 0, 0, fault.InvalidField("user", fmt.Sprintf("user %q maps outside the ids a sandbox has (0-%d)", user, layer.IDRange-1))
	}
	return uid, gid, nil
}

// lookup finds a passwd or group line by name (or, with id >= 0, by its
// id) and returns its third and fourth fields (the group's fourth is its
// member list, not read).
func lookup(file []byte, name string, id int) (int, int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(file))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 3 {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		if f[0] != name && n != id {
			continue
		}
		g := -1
		if len(f) > 3 {
			if v, err := strconv.Atoi(f[3]); err == nil {
				g = v
			}
		}
		return n, g, true
	}
	return -1, -1, false
}
