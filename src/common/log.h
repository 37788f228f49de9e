/* Logging for every Tandem program.
 * Owns: the log sink (stderr in the foreground, syslog otherwise) and the level filter.
 * Never: allocates, or keeps state beyond the sink choice made once at start-up. */
#ifndef TANDEM_LOG_H
#define TANDEM_LOG_H

enum log_level { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Set once at start-up before any thread exists; read-only afterwards. */
void log_init(const char *ident, int to_stderr, enum log_level max);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
