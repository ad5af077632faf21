package admission

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Bounds of the shared counters.
const (
	// redisTimeout bounds one charge at Redis; past it the charge is
	// counted in this process.
	redisTimeout = 500 * time.Millisecond
	// redisRetryEvery is how often, while Redis is down, one charge tries
	// it again; the others count in this process meanwhile.
	redisRetryEvery = time.Second
	defaultPoolSize = 16
)

// fixedWindow is the counting script: one more in the key's window, the
// window opened by the first charge (EXPIRE), and the seconds it has left.
// A key left without a TTL (never expected) is given one, so no window is
// endless.
var fixedWindow = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`)

// silenceRedisLog turns off go-redis's process-wide logger: every failure
// it would print reaches the Limiter as an error.
var silenceRedisLog sync.Once

// sharedCounter counts windows in Redis, shared by every process of the
// deployment.
type sharedCounter struct {
	client *redis.Client
	// down is set from a failed charge until one succeeds; retryAt (unix
	// nanoseconds) is when the next try is due and probing marks the one
	// charge making it.
	down    atomic.Bool
	retryAt atomic.Int64
	probing atomic.Bool
}

func newSharedCounter(url string, poolSize int) (*sharedCounter, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		// The parse error can quote the URL, password included.
		return nil, errors.New("invalid REDIS_URL: must be a redis:// or rediss:// URL")
	}
	silenceRedisLog.Do(func() { redis.SetLogger(&logging.VoidLogger{}) })
	if poolSize <= 0 {
		poolSize = defaultPoolSize
	}
	opts.PoolSize = poolSize
	opts.ClientName = "buzz-relay-admission"
	opts.MaxRetries = -1 // a failed charge is counted here, never retried
	opts.DialerRetries = 1
	opts.DialTimeout = redisTimeout
	opts.ReadTimeout = redisTimeout
	opts.WriteTimeout = redisTimeout
	opts.ContextTimeoutEnabled = true
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return &sharedCounter{client: redis.NewClient(opts)}, nil
}

func (s *sharedCounter) close() { _ = s.client.Close() }

// incr runs the script for key; ok is false when Redis was skipped (down,
// and another charge is trying it) or did not answer.
func (s *sharedCounter) incr(ctx context.Context, l *Limiter, key string, window time.Duration) (n int, ttl time.Duration, ok bool) {
	probe := false
	if s.down.Load() {
		if time.Now().UnixNano() < s.retryAt.Load() || !s.probing.CompareAndSwap(false, true) {
			return 0, 0, false
		}
		probe = true
		defer s.probing.Store(false)
	}
	// The request's cancellation must not pass for an outage.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	res, err := fixedWindow.Run(ctx, s.client, []string{key}, int64(window/time.Second)).Int64Slice()
	if err == nil && len(res) != 2 {
		err = errors.New("unexpected script answer")
	}
	if err != nil {
		s.retryAt.Store(time.Now().Add(redisRetryEvery).UnixNano())
		if s.down.CompareAndSwap(false, true) {
			l.m.RedisDown.Set(1)
			l.log.Warn("redis unavailable: quotas counted in this process until it answers", slog.String("err", err.Error()))
		}
		return 0, 0, false
	}
	if (probe || s.down.Load()) && s.down.CompareAndSwap(true, false) {
		l.m.RedisDown.Set(0)
		l.log.Info("redis answers again: quotas shared")
	}
	return int(res[0]), time.Duration(res[1]) * time.Second, true
}
