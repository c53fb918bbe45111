// Package franzgo only pins franz-go: the tests that run are franz-go's own.
package franzgo

import _ "github.com/twmb/franz-go/pkg/kgo"
