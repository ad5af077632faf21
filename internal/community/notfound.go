package community

import (
	"errors"

	"github.com/buzz-relay/buzz/internal/pg"
)

func isNotFound(err error) bool { return errors.Is(err, pg.ErrNotFound) }
