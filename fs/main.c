/* The cclfs command: options, configuration and state directory, the
 * checks that must fail loudly before going to the background, the mount,
 * and the FUSE loop. */
#define FUSE_USE_VERSION 314

#include "fs/ops.h"
#include "fs/passthrough.h"
#include "lifecycle/config.h"
#include "lifecycle/model.h"
#include "lifecycle/statedir.h"

#include <errno.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CCLFS_VERSION
#define CCLFS_VERSION "0.0.0"
#endif

struct cclfs_opts {
	char *config;
	char *statedir;
	int recover;
	int nopassthrough;
	int help;
	int version;
};

#define CCLFS_OPT(t, p)                                                        \
	{                                                                      \
		t, offsetof(struct cclfs_opts, p), 1                           \
	}
static const struct fuse_opt cclfs_optspec[] = {
	CCLFS_OPT("config=%s", config),
	CCLFS_OPT("statedir=%s", statedir),
	CCLFS_OPT("recover", recover),
	CCLFS_OPT("nopassthrough", nopassthrough),
	CCLFS_OPT("-h", help),
	CCLFS_OPT("--help", help),
	CCLFS_OPT("-V", version),
	CCLFS_OPT("--version", version),
	FUSE_OPT_END,
};

static void cclfs_usage(const char *prog)
{
	printf("usage: %s MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]\n"
	       "\n"
	       "Mount cclfs: clusters of machines driven with file "
	       "operations.\n"
	       "Unmount with: fusermount3 -u MOUNTPOINT\n"
	       "\n"
	       "options:\n"
	       "    -h, --help          print this help and exit\n"
	       "    -V, --version       print the version and exit\n"
	       "    -f                  stay in the foreground\n"
	       "    -d                  debug: print every request (implies "
	       "-f)\n"
	       "    -s                  serve requests on one thread\n"
	       "    -o config=FILE      configuration file (default: "
	       "$CCLFS_CONFIG,\n"
	       "                        ./cclfs.conf, "
	       "~/.config/cclfs/cclfs.conf)\n"
	       "    -o statedir=DIR     state directory (default: "
	       "$XDG_STATE_HOME/cclfs,\n"
	       "                        ~/.local/state/cclfs)\n"
	       "    -o recover          mount a damaged state database's "
	       "last-good copy\n"
	       "                        (the damaged file is moved aside "
	       "and kept), or start\n"
	       "                        beside a missing or empty one; "
	       "report every cluster\n"
	       "                        the state directory holds that the "
	       "database does not\n"
	       "                        know\n"
	       "    -o nopassthrough    a local node's files/ goes through "
	       "the daemon, not\n"
	       "                        straight to the node's files (FUSE "
	       "passthrough)\n"
	       "    -o allow_other      let other users see the mount "
	       "(FUSE option)\n"
	       "\n"
	       "See cclfs(1).\n",
	       prog);
}

/* What opening the state found (a recovery, remains of clusters): said
 * on stderr before going to the background. */
static void cclfs_report(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "cclfs: %s\n", line);
}

static int cclfs_check_mountpoint(const char *mp)
{
	struct stat st;

	if (stat(mp, &st)) {
		fprintf(stderr, "cclfs: mount point %s: %s\n", mp,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cclfs: mount point %s is not a directory\n",
			mp);
		return -1;
	}
	return 0;
}

static int cclfs_check_device(void)
{
	if (access("/dev/fuse", R_OK | W_OK) == 0)
		return 0;
	if (errno == ENOENT)
		fprintf(stderr,
			"cclfs: /dev/fuse does not exist: load the fuse module "
			"(modprobe fuse), or in a container pass the device "
			"in (--device /dev/fuse)\n");
	else
		fprintf(stderr, "cclfs: /dev/fuse: %s\n", strerror(errno));
	return -1;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cclfs_opts opts = {0};
	struct fuse_cmdline_opts cmd = {0};
	struct fuse_loop_config *loop = NULL;
	struct model_options mo = {0};
	struct config cfg = {0};
	struct fsctx fs = {0};
	struct fuse *fuse = NULL;
	char statedir[4096], err[1024];
	int lockfd = -1, rc = 1;

	if (fuse_opt_parse(&args, &opts, cclfs_optspec, NULL) == -1)
		return 1;
	if (opts.help) {
		cclfs_usage(argv[0]);
		rc = 0;
		goto out;
	}
	if (opts.version) {
		printf("cclfs %s (libfuse %s)\n", CCLFS_VERSION,
		       fuse_pkgversion());
		rc = 0;
		goto out;
	}
	/* exec blocks a thread for as long as its command runs: allow many
	 * more than libfuse's default of 10 (a user's -o max_threads=, later
	 * on the command line, still wins). */
	fuse_opt_insert_arg(&args, 1, "-omax_threads=256");
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out;
	if (!cmd.mountpoint) {
		fprintf(stderr,
			"cclfs: no mount point given\nusage: %s MOUNTPOINT "
			"[-f] [-d] [-s] [-o OPTION[,OPTION...]] (see --help)\n",
			argv[0]);
		goto out;
	}
	if (cclfs_check_mountpoint(cmd.mountpoint) || cclfs_check_device())
		goto out;
	if (config_load(&cfg, opts.config, err, sizeof(err))) {
		fprintf(stderr, "cclfs: %s\n", err);
		goto out;
	}
	lockfd = statedir_open(opts.statedir, statedir, sizeof(statedir), err,
			       sizeof(err));
	if (lockfd < 0) {
		fprintf(stderr, "cclfs: %s\n", err);
		goto out;
	}
	mo.statedir = statedir;
	mo.config = &cfg;
	mo.verbose = cmd.foreground;
	mo.recover = opts.recover;
	mo.report = cclfs_report;
	/* Open, check and load the state once before going to the
	 * background, so that a damaged, missing or read-only state database
	 * is refused here, and a recovery said here; the connection is not
	 * carried across the fork. */
	fs.model = model_open(&mo, err, sizeof(err));
	if (!fs.model) {
		fprintf(stderr, "cclfs: %s\n", err);
		goto out;
	}
	model_close(fs.model);
	fs.model = NULL;
	mo.checked = 1;
	mo.recover = 0;
	mo.report = NULL;

	fs.uid = getuid();
	fs.mountpoint = cmd.mountpoint;
	/* One worker is one thread: what may not wait with -s may not with
	 * it either. */
	fs.singlethread = cmd.singlethread || cmd.max_threads == 1;
	fs.gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs.mounted);
	fuse_opt_add_arg(&args, "-odefault_permissions");
	fuse_opt_add_arg(&args, "-ofsname=cclfs");
	fuse_opt_add_arg(&args, "-osubtype=cclfs");
	fuse = fuse_new(&args, &fsops, sizeof(fsops), &fs);
	if (!fuse)
		goto out;
	if (fuse_mount(fuse, cmd.mountpoint) != 0)
		goto out_destroy;
	if (passthrough_attach(fuse_get_session(fuse), !opts.nopassthrough))
		goto out_unmount;
	if (fuse_daemonize(cmd.foreground) != 0)
		goto out_unmount;
	if (fuse_set_signal_handlers(fuse_get_session(fuse)) != 0)
		goto out_unmount;
	statedir_set_pid(lockfd);
	fs.model = model_open(&mo, err, sizeof(err));
	if (!fs.model || model_start(fs.model, err, sizeof(err))) {
		fprintf(stderr, "cclfs: %s\n", err);
		goto out_signals;
	}
	if (cmd.singlethread) {
		rc = fuse_loop(fuse) ? 1 : 0;
	} else {
		loop = fuse_loop_cfg_create();
		if (!loop)
			goto out_signals;
		fuse_loop_cfg_set_clone_fd(loop, (unsigned int)cmd.clone_fd);
		/* Leave libfuse's defaults unless -o max_threads= and
		 * -o max_idle_threads= were given. */
		fuse_loop_cfg_set_max_threads(loop, cmd.max_threads);
		if (cmd.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(loop,
						       cmd.max_idle_threads);
		rc = fuse_loop_mt(fuse, loop) ? 1 : 0;
		fuse_loop_cfg_destroy(loop);
	}
out_signals:
	fuse_remove_signal_handlers(fuse_get_session(fuse));
out_unmount:
	fuse_unmount(fuse);
out_destroy:
	fuse_destroy(fuse);
out:
	model_close(fs.model);
	config_free(&cfg);
	if (lockfd >= 0)
		close(lockfd);
	free(cmd.mountpoint);
	free(opts.config);
	free(opts.statedir);
	fuse_opt_free_args(&args);
	return rc;
}
