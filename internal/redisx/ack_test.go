package redisx

import (
	"strings"
	"testing"
	"time"
)

func TestAck_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ack  Ack
		ok   bool
	}{
		{"zero is off", Ack{}, true},
		{"wait 1", Ack{Replicas: 1, Timeout: 250 * time.Millisecond}, true},
		{"wait max", Ack{Replicas: MaxAckReplicas, Timeout: MaxAckTimeout}, true},
		{"wait 0 replicas", Ack{Timeout: time.Second}, false},
		{"wait too many", Ack{Replicas: MaxAckReplicas + 1, Timeout: time.Second}, false},
		{"no timeout", Ack{Replicas: 1}, false},
		{"negative timeout", Ack{Replicas: 1, Timeout: -time.Second}, false},
		{"sub-millisecond", Ack{Replicas: 1, Timeout: time.Millisecond + time.Microsecond}, false},
		{"too long", Ack{Replicas: 1, Timeout: MaxAckTimeout + time.Millisecond}, false},
		{"aof local only", Ack{AOF: true, Local: 1, Timeout: time.Second}, true},
		{"aof replicas only", Ack{AOF: true, Replicas: 2, Timeout: time.Second}, true},
		{"aof nothing", Ack{AOF: true, Timeout: time.Second}, false},
		{"aof local 2", Ack{AOF: true, Local: 2, Replicas: 1, Timeout: time.Second}, false},
		{"aof negative replicas", Ack{AOF: true, Local: 1, Replicas: -1, Timeout: time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.ack.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate(%+v) = %v, want ok %v", tc.ack, err, tc.ok)
			}
		})
	}
}

func TestAck_Then(t *testing.T) {
	wait := Ack{Replicas: 1, Timeout: time.Second}
	aof := Ack{AOF: true, Local: 1, Timeout: time.Second}
	for _, tc := range []struct {
		name    string
		set, b  Ack
		want    Ack
		refused string
	}{
		{"first ack", Ack{}, wait, wait, ""},
		{"first aof", Ack{}, aof, aof, ""},
		{"second ack", wait, wait, wait, "given together"},
		{"ack then aof", wait, aof, wait, "given together"},
		{"invalid", Ack{}, Ack{Replicas: 1}, Ack{}, "timeout"},
		{"zero", Ack{}, Ack{}, Ack{}, "waits for nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.set.Then(tc.b)
			if got != tc.want || (err == nil) != (tc.refused == "") || (err != nil && !strings.Contains(err.Error(), tc.refused)) {
				t.Errorf("%+v.Then(%+v) = %+v, %v; want %+v, refused %q", tc.set, tc.b, got, err, tc.want, tc.refused)
			}
		})
	}
}

// TestWitnessKey_sameHashTag: the witness must land in the slot of the
// key it follows, so its tag is the key's hash tag, or the whole key; and
// under the key's prefix, so an ACL that lets a user write the key lets it
// write the witness.
func TestWitnessKey_sameHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"stock:{sku-1}":      "stock:{sku-1}:witness",
		"p:lock:{a}:x{b}":    "p:lock:{a}:x{b}:witness",
		"plain":              "plain{plain}:witness",
		"order:{o-7}:record": "order:{o-7}:record:witness",
	} {
		got := witnessKey(key)
		if got != want {
			t.Errorf("witnessKey(%q) = %q, want %q", key, got, want)
		}
		if slot(got) != slot(key) {
			t.Errorf("witnessKey(%q) = %q hashes to another slot", key, got)
		}
	}
}

// slot is the part of key Redis Cluster hashes: its hash tag, or all of it.
func slot(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
