package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/shell"
)

// bashRoutes mounts AIO's bash pipe (/v1/bash/*) under prefix: one process
// per command, separate stdout and stderr read by byte offsets.
func (h *shellHandlers) bashRoutes(r chi.Router, prefix string) {
	r.Post(prefix+"/v1/bash/exec", aioJSON[shell.BashExecArgs](h, shell.ToolBashExec))
	r.Post(prefix+"/v1/bash/output", aioJSON[shell.BashOutputArgs](h, shell.ToolBashOutput))
	r.Post(prefix+"/v1/bash/write", aioJSON[shell.BashWriteArgs](h, shell.ToolBashWrite))
	r.Post(prefix+"/v1/bash/kill", aioJSON[shell.BashKillArgs](h, shell.ToolBashKill))
	r.Get(prefix+"/v1/bash/sessions", aioJSON[shell.ListArgs](h, shell.ToolBashList))
	r.Post(prefix+"/v1/bash/sessions/create", aioJSON[shell.BashCreateArgs](h, shell.ToolBashCreate))
	r.Post(prefix+"/v1/bash/sessions/{session_id}/close", h.bashClose)
}

func (h *shellHandlers) bashClose(w http.ResponseWriter, r *http.Request) {
	args := shell.BashSessionArgs{Sandbox: chi.URLParam(r, "id"), SessionID: chi.URLParam(r, "session_id")}
	if _, err := h.dispatch(r, shell.ToolBashClose, args); err != nil {
		writeShellError(w, r, err)
		return
	}
	WriteData(w, http.StatusOK, nil)
}
