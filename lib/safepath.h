/* SPDX-License-Identifier: MIT */
/*
 * Directories opvm writes into outside a session's own tree (the build-id
 * cache, the parents of a session directory), opened so that another local
 * user cannot redirect the writes: no path is followed twice, no symbolic
 * link is followed where opvm names the component, and no directory is
 * used that someone else could change under opvm's feet.
 *
 * The rule, per directory:
 *  - the part of a path the user chose (an option, $HOME, $XDG_CACHE_HOME)
 *    is resolved once (its links are the user's own), then walked again
 *    from "/" one component at a time with O_NOFOLLOW: every directory on
 *    the way is owned by this user or root and not writable by group or
 *    others, unless it is sticky (/tmp);
 *  - the components opvm names itself ("opvm/buildid", a guest, "xx") are
 *    opened with O_NOFOLLOW | O_DIRECTORY (openat2 with RESOLVE_BENEATH |
 *    RESOLVE_NO_SYMLINKS where the kernel has it), created with mkdirat()
 *    when missing, and must be owned by this user and writable by no one
 *    else: a link or a foreign directory there is refused, never repaired;
 *  - modes are changed with fchmod() on an fd opvm opened, times with
 *    futimens()/utimensat(AT_SYMLINK_NOFOLLOW), files are renamed with
 *    renameat() between directory fds.
 *
 * A refusal fills err with a sentence that names the directory and says
 * what to do.  Library code: nothing here prints.
 */
#ifndef OPVM_SAFEPATH_H
#define OPVM_SAFEPATH_H

#include <stddef.h>
#include <sys/types.h>

/* safepath_open_*() flags */
#define SAFEPATH_CREATE		1u	/* make missing directories (mode) */
#define SAFEPATH_PRIVATE	2u	/* safepath_open_sub(): the last
					 * directory becomes mode exactly
					 * (fchmod on its fd) */

/*
 * Opens the directory path a user chose, creating what is missing of it
 * with SAFEPATH_CREATE (mode, less the umask).  The existing part is
 * resolved once (realpath) and every directory from "/" down is checked as
 * above; the missing part is made component by component.  Returns an
 * O_DIRECTORY fd, or -errno with err filled: -ELOOP (a link appeared while
 * it was walked), -EPERM (a directory of another user, or writable by
 * others), -ENOTDIR, or what the system said.  real (if not NULL) gets the
 * resolved absolute path, at most reallen bytes (-ENAMETOOLONG if longer).
 * The user chose this directory: its mode is never changed.
 */
int safepath_open_base(const char *path, mode_t mode, unsigned flags, char *real,
		       size_t reallen, char *err, size_t errlen);

/*
 * Opens rel ("opvm/buildid", "GUEST", "xx"; no "." or ".." component, not
 * absolute) below the directory fd dfd, one component at a time, every
 * one opvm's: not a link, a directory, owned by this user, writable by no
 * one else.  shown is how dfd appears in messages (its path).  With
 * SAFEPATH_CREATE missing components are made (mode); with
 * SAFEPATH_PRIVATE the last one's mode is set to mode if it differs.
 * Returns an O_DIRECTORY fd or -errno with err filled (-ELOOP for a link,
 * -EPERM for someone else's or a shared directory, -ENOENT without
 * SAFEPATH_CREATE).
 */
int safepath_open_sub(int dfd, const char *shown, const char *rel, mode_t mode,
		      unsigned flags, char *err, size_t errlen);

/*
 * Opens a session directory (opvm run/attach -d DIR), made with what is
 * missing of it (mode, less the umask) when SAFEPATH_CREATE: its parents
 * are checked as safepath_open_base() does, and the directory itself must
 * be opvm's to fill, owned by this user and writable by no one else, not
 * even when sticky: another user who may create entries in it could plant
 * guests/NAME as a link to someone's directory.  Everything below it is
 * then opened from the returned fd, one component at a time, without
 * following links (safepath_open_sub(), openat(O_NOFOLLOW)).  The fd, or
 * -errno with err filled (one sentence naming the directory and saying
 * what to do).
 */
int safepath_open_session(const char *path, mode_t mode, unsigned flags, char *err,
			  size_t errlen);

/*
 * SESSION/guests/NAME (name: one component), made when missing (0755, less
 * the umask), walked from the checked session directory
 * (safepath_open_session()) without following a link: a link or another
 * user's directory there is refused before anything is written in it.
 * The O_DIRECTORY fd, or -errno with err filled.
 */
int safepath_open_guest(const char *session, const char *name, char *err, size_t errlen);

/*
 * Creates or truncates the file name (one component) in the directory fd
 * dfd for writing (O_WRONLY, plus flags such as O_APPEND): never through a
 * link (-ELOOP), never blocked by a FIFO planted there, and only a regular
 * file with one link (-EINVAL, -EMLINK otherwise): a hard link to a file
 * elsewhere is not truncated.  Mode for a new file, less the umask.
 * The fd (blocking, O_CLOEXEC), or -errno.
 */
int safepath_create_file(int dfd, const char *name, mode_t mode, int flags);

/*
 * Whether the open directory fd may be written by opvm: owned by this user
 * (own_only) or by this user or root (!own_only), and writable by no one
 * else (unless sticky, for !own_only).  0, or -EPERM / -ENOTDIR with err
 * naming shown and saying what to do.
 */
int safepath_check_dir(int fd, const char *shown, int own_only, char *err, size_t errlen);

#endif /* OPVM_SAFEPATH_H */
