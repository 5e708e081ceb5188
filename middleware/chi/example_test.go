package keygatechi_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

// Example shows package middleware as chi middleware, with no adapter.
func Example() {
	mw, err := middleware.New(context.Background(), middleware.Config{Issuers: []middleware.Issuer{{
		Issuer:     "https://idp.example.com/",
		JWKSURL:    "https://idp.example.com/.well-known/jwks.json",
		Algorithms: []jose.Alg{jose.RS256},
		Audiences:  []string{"orders-api"},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	r := chi.NewRouter()
	r.Route("/orders", func(r chi.Router) {
		r.Use(mw.Require("orders:read"))
		r.Get("/{id}", func(w http.ResponseWriter, r *http.Request) {
			id, _ := middleware.FromContext(r.Context())
			fmt.Fprintf(w, "order %s of %s\n", chi.URLParam(r, "id"), id.Subject)
		})
	})
	log.Fatal(http.ListenAndServe(":8080", r))
}
