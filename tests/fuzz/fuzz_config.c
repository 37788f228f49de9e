/* libFuzzer harness for the configuration parser (libinih plus validation):
 * the input, NUL-terminated, is a config file. Properties beyond "no crash":
 * an accepted config satisfies the invariants the daemon relies on; a
 * rejected one comes with one line that starts with the file name. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/config/config.h"

#include "fuzz.h"

static void check_cfg(const struct cfg *c)
{
	CHECK(c->cluster[0]);
	CHECK(c->nnodes >= 1 && c->nnodes <= CFG_MAX_NODES);
	CHECK(c->nvolumes <= CFG_MAX_VOLUMES);
	if (c->nnodes > 1)
		CHECK(c->secret[0]);
	for (unsigned i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];
		CHECK(n->name[0] && strlen(n->name) < CFG_NAME_MAX);
		CHECK(n->control[0] && n->data_dir[0]);
		CHECK(strcmp(n->control, n->data_dir) != 0);
		CHECK(cfg_node_index(c, n->name) == (int)i); /* names unique */
	}
	for (unsigned i = 0; i < c->nvolumes; i++) {
		const struct cfg_volume *v = &c->volumes[i];
		CHECK(v->name[0]);
		CHECK(v->size && v->size % 4096 == 0);
		CHECK(v->nnodes >= 1 && v->nnodes <= 2);
		for (unsigned k = 0; k < v->nnodes; k++)
			CHECK(v->nodes[k] < c->nnodes);
		if (v->nnodes == 2)
			CHECK(v->nodes[0] != v->nodes[1]);
		for (unsigned n = 0; n < CFG_MAX_NODES; n++)
			if (v->disk[n][0])
				CHECK(n < c->nnodes && cfg_volume_has_node(v, n));
		for (unsigned k = 0; k < i; k++)
			CHECK(strcmp(c->volumes[k].name, v->name) != 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	char err[512];
	struct cfg *c = NULL;
	int r;

	if (size > 256 * 1024)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	r = cfg_parse_string(text, "fuzz.ini", &c, err, sizeof(err));
	if (r == 0) {
		CHECK(c != NULL);
		check_cfg(c);
		cfg_free(c);
	} else {
		CHECK(r == -EINVAL);
		CHECK(c == NULL);
		CHECK(strncmp(err, "fuzz.ini:", 9) == 0 || strncmp(err, "fuzz.ini: ", 10) == 0);
	}
	free(text);
	return 0;
}
