package middleware_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

// Require's func(http.Handler) http.Handler is the middleware type of chi
// (Router.Use, Router.With) and of most net/http routers, so they need no
// adapter: with chi, r.With(mw.Require("orders:write")).Post("/orders", h).
// Without a router, wrap each handler.
func ExampleMiddleware_Require() {
	ctx := context.Background()
	mw, err := middleware.New(ctx, middleware.Config{Issuers: []middleware.Issuer{{
		Issuer:     "https://idp.example.com/",
		JWKSURL:    "https://idp.example.com/.well-known/jwks.json",
		Algorithms: []jose.Alg{jose.RS256},
		Audiences:  []string{"orders-api"},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mw.Close()
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := middleware.FromContext(r.Context())
		fmt.Fprintf(w, "orders of %s\n", id.Subject)
	})
	mux := http.NewServeMux()
	mux.Handle("GET /orders", mw.Handler(orders))
	mux.Handle("POST /orders", mw.Require("orders:write")(orders))
	http.ListenAndServe(":8080", mux)
}

// Check is the decision without net/http's handler types, for an adapter
// to another framework: write the refusal's Status, Header and Body, or
// put the Identity where the framework's handlers look for it.
func ExampleMiddleware_Check() {
	var mw *middleware.Middleware // from middleware.New
	serve := func(w http.ResponseWriter, r *http.Request) {
		o := mw.Check(r.Context(), r.Header, "orders:read")
		if !o.Allowed() {
			o.Write(w) // or: copy o.Header(), then o.Status and o.Body()
			return
		}
		r = r.WithContext(middleware.NewContext(r.Context(), o.Identity))
		fmt.Fprintf(w, "hello, %s\n", o.Identity.Subject)
	}
	_ = serve
}
