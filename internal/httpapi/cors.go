package httpapi

import (
	"net/http"
	"strings"
)

// Bridge CORS values of docs/PROTOCOL.md §8.6. NIP-11 has its own (nip11.go).
const (
	bridgeAllowMethods = "GET, POST, OPTIONS"
	bridgeAllowHeaders = "Authorization, Content-Type, X-Pubkey"
)

// setBridgeCORS sets the CORS headers of a bridge response: "*" when no
// origins are configured; otherwise the request Origin echoed when it is
// listed, and Vary: Origin either way so caches keep answers apart.
func (s *Server) setBridgeCORS(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if s.origins == nil {
		h.Set("Access-Control-Allow-Origin", "*")
		return
	}
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if _, ok := s.origins[strings.ToLower(strings.TrimSuffix(origin, "/"))]; ok && origin != "" {
		h.Set("Access-Control-Allow-Origin", origin)
	}
}

// bridgePreflight answers OPTIONS on a bridge route: 204 with the allowed
// methods and headers. It needs no community and no authentication.
func (s *Server) bridgePreflight(w http.ResponseWriter, r *http.Request) {
	s.setBridgeCORS(w, r)
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", bridgeAllowMethods)
	h.Set("Access-Control-Allow-Headers", bridgeAllowHeaders)
	w.WriteHeader(http.StatusNoContent)
}
