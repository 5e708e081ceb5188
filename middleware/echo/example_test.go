package keygateecho_test

import (
	"context"
	"log"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
	keygateecho "github.com/keygate/keygate/middleware/echo"
)

func ExampleNew() {
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

	e := echo.New()
	orders := e.Group("/orders", keygateecho.New(mw, "orders:read"))
	orders.GET("/:id", func(c echo.Context) error {
		id, _ := keygateecho.FromContext(c)
		return c.JSON(http.StatusOK, map[string]string{"order": c.Param("id"), "owner": id.Subject})
	})
	e.Logger.Fatal(e.Start(":8080"))
}
