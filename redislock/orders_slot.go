package redislock

import "strings"

// hashTag is the part of key a Redis Cluster hashes:
// between the first "{" and the next "}" when that is not empty, else the
// whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag, modulo 16384. It decides, without asking the cluster, whether an
// order's keys can go to one script.
func slot(key string) uint16 {
	key = hashTag(key)
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
