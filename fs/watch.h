/* Poll waiters of the tree: open files whose reader polls (poll, select,
 * epoll) for a change, woken by the model's change notices with
 * fuse_notify_poll. */
#ifndef CCLFS_FS_WATCH_H
#define CCLFS_FS_WATCH_H

struct watch;
struct fuse_pollhandle;

struct watch *watch_new(void);
/* Destroys every poll handle still kept. */
void watch_free(struct watch *w);

/* Keep ph (owned from now on) for `owner`, an open file of mount path
 * `path` ("/clusters/H/log"): the next watch_changed of that path wakes
 * its poller. An earlier handle of the same owner is destroyed. */
void watch_add(struct watch *w, const void *owner, const char *path,
	       struct fuse_pollhandle *ph);
/* A mount-relative path changed ("clusters/H/log"; one ending in "/"
 * stands for every path below it): wake and drop the pollers of it. Any
 * thread, never blocks on the kernel. */
void watch_changed(struct watch *w, const char *relpath);
/* The open file `owner` is closed: drop what is kept for it. */
void watch_forget(struct watch *w, const void *owner);

#endif
