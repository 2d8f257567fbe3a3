// asynq's hello-world producer, for comparison.
package main

import (
	"fmt"
	"log"

	"github.com/hibiken/asynq"
)

func main() {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: "localhost:6379"})
	defer c.Close()
	info, err := c.Enqueue(asynq.NewTask("hello", []byte(`{"to":"ada"}`)), asynq.TaskID("hello-ada"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID)
}
