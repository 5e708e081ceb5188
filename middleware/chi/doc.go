// Package keygatechi holds no code: chi's middleware type is net/http's,
// func(http.Handler) http.Handler, which package middleware's Require
// already is, so chi needs no adapter.
//
//	r := chi.NewRouter()
//	r.Use(mw.Handler)                                         // any valid token
//	r.With(mw.Require("orders:write")).Post("/orders", create) // and a scope
//	// in create: id, _ := middleware.FromContext(r.Context())
//
// This module, github.com/keygate/keygate/middleware/chi, only runs
// middleware's shared table test (package middlewaretest) behind a chi
// router, so that keygate's core module never imports chi.
package keygatechi
