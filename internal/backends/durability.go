package backends

import (
	"context"
	"database/sql"
	"fmt"
)

// Durability is how a MySQL or MariaDB server makes commits durable, as it
// reports its own settings.
type Durability struct {
	// FlushLogAtTrxCommit is innodb_flush_log_at_trx_commit: 1 writes and
	// flushes the redo log at every commit; 2 writes it at commit and
	// flushes it about once a second; 0 does both about once a second.
	FlushLogAtTrxCommit int
	// SyncBinlog is sync_binlog: 1 flushes the binary log at every commit.
	SyncBinlog int
	// LogBin reports whether the binary log is on.
	LogBin bool
}

// Full reports whether a committed transaction survives a crash of the
// machine: the redo log and the binary log are flushed at every commit.
func (d Durability) Full() bool {
	return d.FlushLogAtTrxCommit == 1 && d.LogBin && d.SyncBinlog == 1
}

// String reads "innodb_flush_log_at_trx_commit=1 log_bin=ON sync_binlog=1".
func (d Durability) String() string {
	bin := "OFF"
	if d.LogBin {
		bin = "ON"
	}
	return fmt.Sprintf("innodb_flush_log_at_trx_commit=%d log_bin=%s sync_binlog=%d", d.FlushLogAtTrxCommit, bin, d.SyncBinlog)
}

// ReadDurability asks the server behind db for its durability settings.
func ReadDurability(ctx context.Context, db *sql.DB) (Durability, error) {
	var d Durability
	var logBin int
	err := db.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin").
		Scan(&d.FlushLogAtTrxCommit, &d.SyncBinlog, &logBin)
	if err != nil {
		return Durability{}, fmt.Errorf("backends: reading the durability settings: %w", err)
	}
	d.LogBin = logBin != 0
	return d, nil
}
