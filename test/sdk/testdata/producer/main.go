// A hello-world dtq producer: the SDK's HTTP client alone.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/dtq-dev/dtq/pkg/client"
)

func main() {
	c, err := client.New("https://dtq-api.dtq-system.svc", client.WithTokenFile(client.APITokenFile))
	if err != nil {
		log.Fatal(err)
	}
	t, err := c.Queue("shop", "emails").Submit(context.Background(), "hello", map[string]string{"to": "ada"}, client.IdempotencyKey("hello-ada"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.TaskID)
}
