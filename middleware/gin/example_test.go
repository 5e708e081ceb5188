package keygategin_test

import (
	"context"
	"log"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
	keygategin "github.com/keygate/keygate/middleware/gin"
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

	r := gin.New()
	orders := r.Group("/orders", keygategin.New(mw, "orders:read"))
	orders.GET("/:id", func(c *gin.Context) {
		id, _ := keygategin.FromContext(c)
		c.JSON(http.StatusOK, gin.H{"order": c.Param("id"), "owner": id.Subject})
	})
	r.Run(":8080")
}
