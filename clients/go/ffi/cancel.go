package ffi

import (
	"context"
	"time"

	cuzk "github.com/cuzk/cuzk/clients/go"
)

// cancelJob cancels a job on a new connection (best effort, within 10 s): the caller's
// context ended, and no one else will wait for it.
func cancelJob(socket, name string, jobID uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cuzk.Dial(ctx, socket, name)
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Cancel(ctx, jobID)
}
