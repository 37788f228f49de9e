/* What compression (src/repl/repl_pack.h) gives on a file of data, one core:
 *   pack-bench FILE [ROUNDS]
 * FILE is cut into payloads of 4 KiB, 64 KiB, 256 KiB and 1 MiB (the sizes
 * of front-end writes and resync pieces); each codec compresses every payload
 * as the replication link does (pack_compress: the sample test, then the
 * whole, raw when not worth it), then decompresses what it compressed. One
 * line per codec and size: the ratio (bytes on the wire / data, raw payloads
 * counted whole), the share of payloads sent raw, and MB/s of data per core
 * for compression and decompression (the best of ROUNDS, default 3).
 * bench/pack.sh makes FILE with fio. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../include/proto/repl.h"
#include "../src/repl/repl_pack.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 4u << 10, 64u << 10, 256u << 10, 1u << 20 };
	static const uint16_t codecs[] = { REPL_HF_LZ4, REPL_HF_ZSTD };
	char *end = NULL;
	unsigned long rounds = argc > 2 ? strtoul(argv[2], &end, 10) : 3;
	struct stat st;
	uint8_t *data, *z, *out;
	size_t *zl, len, got = 0;
	struct pack *p;
	int fd;

	if (argc < 2 || rounds < 1 || rounds > 100 || (end && *end)) {
		fprintf(stderr, "usage: pack-bench FILE [ROUNDS]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	len = (size_t)st.st_size - (size_t)st.st_size % (1u << 20);
	data = malloc(len);
	z = malloc(len);
	out = malloc(len);
	zl = calloc(len / 4096, sizeof(*zl));
	if (!len || !data || !z || !out || !zl || pack_new(&p)) {
		fprintf(stderr, "pack-bench: %s: empty, or out of memory\n", argv[1]);
		return 1;
	}
	while (got < len) {
		ssize_t n = read(fd, data + got, len - got);
		if (n <= 0) {
			perror("read");
			return 1;
		}
		got += (size_t)n;
	}
	close(fd);
	printf("%-5s %8s %7s %6s %12s %12s\n", "codec", "payload", "ratio", "raw", "compress",
	       "decompress");
	for (size_t c = 0; c < sizeof(codecs) / sizeof(codecs[0]); c++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t sz = sizes[s], n = len / sz, wire = 0, raw = 0;
			double best_c = 1e9, best_d = 1e9;
			for (unsigned long r = 0; r < rounds; r++) {
				double t0 = now(), t1, t2;
				wire = raw = 0;
				for (size_t i = 0; i < n; i++) {
					zl[i] = pack_compress(p, codecs[c], data + i * sz, sz,
							      z + i * sz);
					wire += zl[i] ? zl[i] : sz;
					raw += !zl[i];
				}
				t1 = now();
				for (size_t i = 0; i < n; i++)
					if (zl[i] && pack_decompress(p, codecs[c], z + i * sz,
								     zl[i], out + i * sz, sz)) {
						fprintf(stderr,
							"pack-bench: payload %zu does not "
							"decompress\n",
							i);
						return 1;
					}
				t2 = now();
				best_c = t1 - t0 < best_c ? t1 - t0 : best_c;
				best_d = t2 - t1 < best_d ? t2 - t1 : best_d;
			}
			printf("%-5s %7zuK %7.3f %5.1f%% %7.0f MB/s %7.0f MB/s\n",
			       pack_codec_name(codecs[c]), sz >> 10, (double)wire / (double)len,
			       100.0 * (double)raw / (double)n, (double)len / best_c / 1e6,
			       (double)(len - raw * sz) / best_d / 1e6);
		}
	pack_free(p);
	free(data);
	free(z);
	free(out);
	free(zl);
	return 0;
}
