/* Log sink. The settings are written once by log_init() before the event loop
 * starts and only read afterwards, so they are process configuration rather than
 * mutable state shared between components. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

static struct {
	const char *ident;
	int to_stderr;
	enum log_level max;
} log_cfg = { "tandem", 1, LOG_LVL_INFO };

void log_init(const char *ident, int to_stderr, enum log_level max)
{
	log_cfg.ident = ident;
	log_cfg.to_stderr = to_stderr;
	log_cfg.max = max;
	if (!to_stderr)
		openlog(ident, LOG_PID, LOG_DAEMON);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	va_list ap;

	if (lvl > log_cfg.max)
		return;
	va_start(ap, fmt);
	if (log_cfg.to_stderr) {
		char msg[1024];
		struct timespec ts;
		struct tm tm;

		vsnprintf(msg, sizeof(msg), fmt, ap);
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s: %s\n", tm.tm_hour, tm.tm_min,
			tm.tm_sec, ts.tv_nsec / 1000000, log_cfg.ident, names[lvl], msg);
	} else {
		vsyslog(prio[lvl], fmt, ap);
	}
	va_end(ap);
}
