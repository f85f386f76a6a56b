/* The model's clock, its log (the state store's log table, and stderr in
 * the foreground) and its notices of changed paths to the filesystem: the
 * bottom of lifecycle/, used by every other file of it. */
#include "lifecycle/model_priv.h"

#include "lifecycle/store.h"
#include "lifecycle/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int64_t model_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void model_timespec(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
}

void model_notify_path(struct model *m, const char *path)
{
	pthread_cond_broadcast(&m->changed_cond);
	if (m->changed)
		m->changed(m->changed_ctx, path);
}

/* Append a line to the log of `subject` (best effort: a log that cannot be
 * written must not turn a good operation into a failed one). */
void model_log(struct model *m, const char *subject, const char *fmt, ...)
{
	char raw[MODEL_ERR_MAX + 256], line[MODEL_ERR_MAX + 256], err[256];
	int64_t now = model_now();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	text_escape(raw, line, sizeof(line));
	if (store_log(m->store, subject, now, line, err, sizeof(err)) &&
	    m->verbose)
		fprintf(stderr, "cclfs: %s\n", err);
	if (m->verbose)
		fprintf(stderr, "cclfs: %s: %s\n", subject, line);
}
