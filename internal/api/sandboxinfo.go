package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/shell"
)

// sandboxInfoBody is AIO's SandboxResponse: the envelope with the
// environment beside it (AIO puts it at the top level, data is null).
type sandboxInfoBody struct {
	Success bool    `json:"success"`
	Message string  `json:"message"`
	Data    *string `json:"data"`
	Hint    *string `json:"hint"`
	shell.SandboxInfo
}

// sandboxInfo is GET /v1/sandbox: the sandbox's environment, gathered
// inside it and cached.
func (h *shellHandlers) sandboxInfo(w http.ResponseWriter, r *http.Request) {
	res, err := h.dispatch(r, shell.ToolSandboxDetail, shell.InfoArgs{Sandbox: chi.URLParam(r, "id")})
	if err == nil {
		var info shell.SandboxInfo
		if info, err = dispatch.ResultAs[shell.SandboxInfo](shell.ToolSandboxDetail, res); err == nil {
			writeJSON(w, http.StatusOK, sandboxInfoBody{Success: true, Message: "ok", SandboxInfo: info})
			return
		}
	}
	writeShellError(w, r, err)
}

// sandboxPackages is GET /v1/sandbox/packages/{python,nodejs}: what the
// package manager inside the sandbox lists.
func (h *shellHandlers) sandboxPackages(lang string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := h.dispatch(r, shell.ToolPackages, shell.InfoArgs{Sandbox: chi.URLParam(r, "id"), Language: lang})
		if err != nil {
			writeShellError(w, r, err)
			return
		}
		WriteData(w, http.StatusOK, res)
	}
}
