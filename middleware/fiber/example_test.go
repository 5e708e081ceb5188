package keygatefiber_test

import (
	"context"
	"log"

	"github.com/gofiber/fiber/v2"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
	keygatefiber "github.com/keygate/keygate/middleware/fiber"
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

	app := fiber.New()
	orders := app.Group("/orders", keygatefiber.New(mw, "orders:read"))
	orders.Get("/:id", func(c *fiber.Ctx) error {
		id, _ := keygatefiber.FromContext(c)
		return c.JSON(fiber.Map{"order": c.Params("id"), "owner": id.Subject})
	})
	log.Fatal(app.Listen(":8080"))
}
