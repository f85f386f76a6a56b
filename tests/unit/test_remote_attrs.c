/* The attributes an SSH node's files/ call learned in its flight: they
 * answer getattrs only while no change or command ended since they were
 * asked, and within REMOTE_ATTRS_NS. */
#include "providers/remote_attrs.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

static struct stat attrs(off_t size)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_mode = S_IFREG | 0644;
	st.st_size = size;
	return st;
}

static int node_a, node_b; /* two nodes' keys */

/* A thread that ends changes while the main one keeps attributes. */
static void *changer(void *arg)
{
	for (int i = 0; i < 10000; i++)
		remote_attrs_changed();
	(void)arg;
	return NULL;
}

int main(void)
{
	struct stat st = attrs(1), got;
	uint64_t e = remote_attrs_epoch();

	/* kept: answers with what was kept, for its node and path */
	remote_attrs_put(&node_a, "f", &st, e);
	CHECK(!remote_attrs_get(&node_b, "f", &got));
	CHECK(!remote_attrs_get(&node_a, "g", &got));
	CHECK(remote_attrs_get(&node_a, "f", &got));
	CHECK(got.st_size == 1 && got.st_mode == (S_IFREG | 0644));
	CHECK(remote_attrs_get(&node_a, "f", &got) && got.st_size == 1);

	/* a change or a command that ended voids it, on every node */
	remote_attrs_put(&node_a, "f", &st, remote_attrs_epoch());
	remote_attrs_put(&node_b, "f", &st, remote_attrs_epoch());
	remote_attrs_changed();
	CHECK(!remote_attrs_get(&node_a, "f", &got));
	CHECK(!remote_attrs_get(&node_b, "f", &got));

	/* asked before a change that ended before it was kept: not kept */
	e = remote_attrs_epoch();
	remote_attrs_changed();
	remote_attrs_put(&node_a, "f", &st, e);
	CHECK(!remote_attrs_get(&node_a, "f", &got));

	/* unknown attributes are not kept */
	st.st_mode = 0;
	remote_attrs_put(&node_a, "f", &st, remote_attrs_epoch());
	CHECK(!remote_attrs_get(&node_a, "f", &got));
	st = attrs(2);

	/* a change's own attributes: kept, and the change counted */
	e = remote_attrs_epoch();
	remote_attrs_put(&node_b, "other", &st, e);
	remote_attrs_put_changed(&node_a, "f", &st, e);
	CHECK(remote_attrs_epoch() == e + 1);
	CHECK(!remote_attrs_get(&node_b, "other", &got));
	CHECK(remote_attrs_get(&node_a, "f", &got) && got.st_size == 2);

	/* ... unless another change ended during its flight */
	e = remote_attrs_epoch();
	remote_attrs_changed();
	remote_attrs_put_changed(&node_a, "f", &st, e);
	CHECK(remote_attrs_epoch() == e + 2);
	CHECK(!remote_attrs_get(&node_a, "f", &got));

	/* a change that failed (attributes unknown) still counts */
	e = remote_attrs_epoch();
	remote_attrs_put(&node_a, "g", &st, e);
	st.st_mode = 0;
	remote_attrs_put_changed(&node_a, "f", &st, e);
	CHECK(remote_attrs_epoch() == e + 1);
	CHECK(!remote_attrs_get(&node_a, "g", &got));
	st = attrs(3);

	/* a newer entry for the path replaces the older one */
	remote_attrs_put(&node_a, "f", &st, remote_attrs_epoch());
	st.st_size = 4;
	remote_attrs_put(&node_a, "f", &st, remote_attrs_epoch());
	CHECK(remote_attrs_get(&node_a, "f", &got) && got.st_size == 4);

	/* a node whose connection goes takes its entries along */
	remote_attrs_put(&node_a, "f", &st, remote_attrs_epoch());
	remote_attrs_put(&node_b, "f", &st, remote_attrs_epoch());
	remote_attrs_forget(&node_a);
	CHECK(!remote_attrs_get(&node_a, "f", &got));
	CHECK(remote_attrs_get(&node_b, "f", &got));

	/* more paths than slots: the oldest go, the newest answer */
	for (int i = 0; i < 100; i++) {
		char path[16];

		snprintf(path, sizeof(path), "p%d", i);
		st.st_size = i;
		remote_attrs_put(&node_a, path, &st, remote_attrs_epoch());
	}
	CHECK(remote_attrs_get(&node_a, "p99", &got) && got.st_size == 99);
	CHECK(!remote_attrs_get(&node_a, "p0", &got));

	/* too old: not an answer any more */
	remote_attrs_put(&node_a, "f", &st, remote_attrs_epoch());
	{
		struct timespec pause = {.tv_nsec = REMOTE_ATTRS_NS + 20000000};

		nanosleep(&pause, NULL);
	}
	CHECK(!remote_attrs_get(&node_a, "f", &got));

	/* changes ending on other threads are all counted, and an entry
	 * asked during them is never kept past them */
	{
		pthread_t t[2];
		uint64_t start = remote_attrs_epoch();

		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, changer, NULL);
		for (int i = 0; i < 1000; i++) {
			e = remote_attrs_epoch();
			remote_attrs_put_changed(&node_b, "c", &st, e);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		CHECK(remote_attrs_epoch() == start + 20000 + 1000);
		remote_attrs_changed();
		CHECK(!remote_attrs_get(&node_b, "c", &got));
	}
	return check_summary("remote_attrs");
}
