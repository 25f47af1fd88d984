#ifndef CMICROHTTPDSHIM_H
#define CMICROHTTPDSHIM_H
#include <sys/types.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdarg.h>
#include <microhttpd.h>

/* Typed, non-variadic wrappers for the libmicrohttpd calls Swift cannot import
   (MHD_start_daemon takes its options as a variadic list). */

/* The limits one daemon runs with; every field is required. */
struct cmhd_limits {
    /* MHD_OPTION_CONNECTION_LIMIT: connections at once, all clients together. */
    unsigned int connection_limit;
    /* MHD_OPTION_PER_IP_CONNECTION_LIMIT: connections at once from one address. */
    unsigned int per_ip_connection_limit;
    /* MHD_OPTION_CONNECTION_TIMEOUT: seconds a connection may stay idle (slowloris). */
    unsigned int connection_timeout_seconds;
    /* MHD_OPTION_CONNECTION_MEMORY_LIMIT: per-connection buffer, bounds the request line
       and headers (MHD answers 431/414 past it). */
    size_t connection_memory_limit;
    /* MHD_OPTION_THREAD_POOL_SIZE: worker threads, each with its own epoll set and its share
       of the connections; 0 or 1 = the single internal epoll thread. */
    unsigned int thread_pool_size;
};

/* MHD_start_daemon on an already listening socket `listen_fd` with internal epoll
   thread(s) (a pool of them when thread_pool_size > 1), suspend/resume allowed, and the limits above. `completed` runs when a request
   ends (MHD_OPTION_NOTIFY_COMPLETED); `connection` when a connection starts and when it closes
   (MHD_OPTION_NOTIFY_CONNECTION; CLOSED comes before MHD closes the socket). URLs and query
   arguments reach `handler` as sent, %XX escapes undecoded (MHD_OPTION_UNESCAPE_CALLBACK with
   a callback that keeps them; only `+` in a query argument is a space already). Returns NULL
   when MHD refuses to start. */
struct MHD_Daemon *cmhd_start(int listen_fd, const struct cmhd_limits *limits,
                              MHD_AccessHandlerCallback handler, void *handler_cls,
                              MHD_RequestCompletedCallback completed, void *completed_cls,
                              MHD_NotifyConnectionCallback connection, void *connection_cls);

/* The socket of a connection (MHD_CONNECTION_INFO_CONNECTION_FD), or -1. */
int cmhd_connection_fd(struct MHD_Connection *connection);

/* epoll for the connection guard: sockets watched for the peer's hang-up, and an eventfd
   that wakes the waiting thread. Each returns -1 with errno set on failure (man 2 epoll_ctl,
   man 2 eventfd). */

/* epoll_create1(EPOLL_CLOEXEC). */
int cmhd_epoll_create(void);
/* An eventfd (non-blocking, close-on-exec) added to `epfd` for input under token 0. Returns
   the eventfd. */
int cmhd_epoll_add_wakeup(int epfd);
/* Adds `fd` for EPOLLRDHUP (with EPOLLHUP/EPOLLERR, which epoll always reports), one shot,
   under `token` (not 0). */
int cmhd_epoll_watch_hangup(int epfd, int fd, uint64_t token);
/* EPOLL_CTL_DEL of `fd`. */
int cmhd_epoll_forget(int epfd, int fd);
/* epoll_wait: the tokens of up to `max` ready entries into `tokens`; returns their number, 0
   on timeout (`timeout_ms` -1 = none), -1 with errno. */
int cmhd_epoll_wait(int epfd, uint64_t *tokens, int max, int timeout_ms);

/* The client address of a connection as text ("1.2.3.4" / "::1"), into `out` (at least
   64 bytes); returns 0, or -1 when MHD does not know it. */
int cmhd_client_address(struct MHD_Connection *connection, char *out, size_t size);

/* Stops `daemon` without touching the listening socket's state: MHD_quiesce_daemon takes
   the socket out of MHD first, so MHD_stop_daemon cannot shutdown(2) it (a socket systemd
   passed is shared with systemd, which keeps listening on it for the next activation);
   then only this process's descriptor is closed. */
void cmhd_stop(struct MHD_Daemon *daemon);

/* MHD_get_daemon_info(MHD_DAEMON_INFO_CURRENT_CONNECTIONS). */
unsigned int cmhd_current_connections(struct MHD_Daemon *daemon);

/* MHD_YES / MHD_NO as plain ints for Swift. */
#define CMHD_YES 1
#define CMHD_NO 0
#endif
