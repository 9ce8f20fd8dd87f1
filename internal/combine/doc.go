// Package combine combines concurrent requests for one key into batches written one at a time, for the batched strategies of mysqllock and redislock (flat combining).
package combine
