/* mpiexec on clusters: Open MPI's mpirun run from the launch node with the
 * cluster's hostfile and a command's environment (cluster_exec.c), its
 * outputs kept for mpi_stdout/mpi_stderr, recorded as under way until its
 * result is stored (the nodes were prepared for it by the deploy and resume
 * jobs, cluster_jobs.c). */
#include "lifecycle/cluster_hostfile.h"
#include "lifecycle/cluster_priv.h"
#include "lifecycle/store.h"
#include "providers/ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_uint cluster_mpi_seq;

/* The command the launch node runs: mpirun with the cluster's hostfile
 * and every slot, config/directory and config/mpiflags applied. */
static char *cluster_mpi_command(const struct cluster *c, const char *line,
				 const char *directory, const char *mpiflags)
{
	char qdir[2 * PATH_MAX + 8] = "";
	size_t cap = strlen(line) + strlen(mpiflags) + sizeof(qdir) + 256;
	char *s = malloc(cap);
	long total = (long)c->process_count * c->node_count;

	if (!s)
		return NULL;
	if (*directory && ssh_quote(directory, qdir, sizeof(qdir))) {
		free(s);
		return NULL;
	}
	/* With a directory, every rank starts there (--wdir), on every node;
	 * without, Open MPI starts them where mpirun runs, or in the home
	 * directory of a node that has no such directory. */
	snprintf(s, cap,
		 "%s%s%sexec mpirun --hostfile \"$CCLFS_HOSTFILE\" -np %ld%s "
		 "%s%s%s",
		 *qdir ? "cd " : "", qdir, *qdir ? " || exit 1; " : "", total,
		 *qdir ? " --wdir \"$PWD\"" : "", mpiflags,
		 *mpiflags ? " " : "", line);
	return s;
}

/* The node mpirun runs on: the manager, else node 0. */
static struct cluster_node *cluster_mpi_launcher(struct cluster *c)
{
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].pn.rank < 0)
			return &c->nodes[i];
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].pn.rank == 0)
			return &c->nodes[i];
	return NULL;
}

int model_mpiexec(struct model *m, const char *handle, const char *command,
		  size_t len, int (*cancelled)(void *), void *cancel_ctx,
		  int *out_fd)
{
	char dir[PATH_MAX], why[2 * MODEL_ERR_MAX], err[MODEL_ERR_MAX] = "";
	char out[PATH_MAX + 64], errp[PATH_MAX + 64], final[PATH_MAX + 64];
	char q[96], node[16];
	unsigned seq = atomic_fetch_add(&cluster_mpi_seq, 1);
	struct provider_run run = {.exit_status = -1};
	struct cluster_env env = {0};
	struct cluster_running r;
	struct cluster_node *launch;
	struct provider_node pn;
	struct provider *p;
	struct cluster *c;
	char *line, *cmd;
	int rc;

	if (out_fd)
		*out_fd = -1;
	if (memchr(command, '\0', len)) {
		pthread_mutex_lock(&m->lock);
		c = cluster_find(m, handle);
		snprintf(why, sizeof(why),
			 "the command contains a NUL byte (byte %zu of %zu), "
			 "which no command line can hold; nothing was run",
			 (size_t)((const char *)memchr(command, '\0', len) -
				  command) +
				 1,
			 len);
		rc = c ? cluster_fail(m, c, "mpiexec", -EINVAL, why) : -ENOENT;
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	while (len && (command[len - 1] == '\n' || command[len - 1] == ' ' ||
		       command[len - 1] == '\t' || command[len - 1] == '\r'))
		len--;
	while (len && (*command == ' ' || *command == '\t'))
		command++, len--;
	line = strndup(command, len);
	if (!line)
		return -ENOMEM;
	snprintf(q, sizeof(q), "\"%.60s%s\"", line, len > 60 ? "..." : "");
	for (char *s = q; *s; s++)
		if (*s == '\n')
			*s = ';';
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c) {
		pthread_mutex_unlock(&m->lock);
		free(line);
		return -ENOENT;
	}
	if (!cluster_is_mpi(c)) {
		rc = cluster_fail(m, c, "mpiexec", -EBUSY,
				  "this is a PeerWorkers cluster, which has no "
				  "MPI; deploy one from a contract whose "
				  "cluster_type is PeerWorkersMPI or "
				  "ManagerWorkers, or run the command through "
				  "exec");
		goto refused;
	}
	if (c->state != CLUSTER_RUNNING) {
		snprintf(why, sizeof(why),
			 "the cluster is %s; MPI programs run only on a "
			 "running cluster",
			 cluster_state_names[c->state]);
		rc = cluster_fail(m, c, "mpiexec", -EBUSY, why);
		goto refused;
	}
	if (len == 0 || memchr(line, '\n', len)) {
		snprintf(why, sizeof(why),
			 "%s is not one command line; write the program and "
			 "its arguments on one line, as for mpirun",
			 len ? q : "\"\"");
		rc = cluster_fail(m, c, "mpiexec", -EINVAL, why);
		goto refused;
	}
	launch = cluster_mpi_launcher(c);
	cluster_dir(m, c, dir, sizeof(dir));
	cmd = cluster_mpi_command(
		c, line, m->contract_config(m, c->contract, "directory"),
		m->contract_config(m, c->contract, "mpiflags"));
	if (!launch || !cmd || !*dir || cluster_mkdirs(dir) ||
	    cluster_write_hostfile(m, c, dir, seq)) {
		rc = cluster_fail(m, c, "mpiexec", -EIO,
				  !cmd ? "the command line could not be made "
					 "(config/directory too long?)"
				       : "the job's output files could not be "
					 "made in the state directory");
		free(cmd);
		goto refused;
	}
	p = cluster_provider(m, launch);
	pn = launch->pn;
	snprintf(node, sizeof(node), "%s", launch->name);
	snprintf(out, sizeof(out), "%s/.mpi.%u.stdout", dir, seq);
	snprintf(errp, sizeof(errp), "%s/.mpi.%u.stderr", dir, seq);
	cluster_running_start(&r, c, "mpi", seq);
	/* The outputs exist, then the record that the job runs. */
	rc = cluster_env_make(m, c, launch, dir, &env);
	if (!rc)
		rc = cluster_output_make(out);
	if (!rc)
		rc = cluster_output_make(errp);
	if (!rc)
		rc = cluster_running_write(&r, dir, "mpiexec", node, q);
	if (rc) {
		unlink(out);
		unlink(errp);
		snprintf(why, sizeof(why),
			 "the job's output files could not be made in %.1000s: "
			 "%s; nothing was run",
			 dir, strerrordesc_np(-rc));
		rc = cluster_fail(m, c, "mpiexec", rc, why);
		cluster_env_free(&env);
		free(cmd);
		goto refused;
	}
	/* Until its results are stored, the cluster is not removed. */
	c->commands++;
	c->active_ns = model_now();
	pthread_mutex_unlock(&m->lock);

	run.command = cmd;
	run.stdout_path = out;
	run.stderr_path = errp;
	run.env = env.envp;
	run.tag = r.tag;
	run.cancelled = cancelled;
	run.cancel_ctx = cancel_ctx;
	rc = p ? p->ops->run(p, &pn, &run, err, sizeof(err)) : -ENOSYS;
	if (!p)
		snprintf(err, sizeof(err), "no provider for node %s", node);
	/* Results in place; the caller reads its own output. */
	if (out_fd)
		*out_fd = open(out, O_RDONLY | O_CLOEXEC);
	snprintf(final, sizeof(final), "%s/mpi.stdout", dir);
	if (rename(out, final) != 0)
		unlink(out);
	snprintf(final, sizeof(final), "%s/mpi.stderr", dir);
	if (rename(errp, final) != 0)
		unlink(errp);

	cluster_env_free(&env);

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c) {
		pthread_mutex_unlock(&m->lock);
		free(cmd);
		free(line);
		return rc ? rc : 0;
	}
	c->commands--;
	c->active_ns = model_now();
	c->mpi_exit_status = rc ? -1 : run.exit_status;
	c->mpi_ns = model_now();
	{
		char serr[MODEL_ERR_MAX];

		/* Stored: the record of the job goes (else the next mount
		 * finds it and says the results were lost). */
		if (cluster_store(m, c, serr, sizeof(serr)) == 0)
			cluster_running_end(&r, dir);
	}
	cluster_notify(m, c, "mpiexec");
	cluster_notify(m, c, "mpi_stdout");
	cluster_notify(m, c, "mpi_stderr");
	cluster_notify(m, c, "mpi_exit_status");
	cluster_notify_files(m, c, NULL);
	if (rc == -EINTR) {
		rc = cluster_fail(m, c, "mpiexec", -EINTR,
				  "the MPI program was interrupted");
	} else if (rc) {
		snprintf(why, sizeof(why), "%s could not be run on node %s: %s",
			 q, node, err);
		rc = cluster_fail(m, c, "mpiexec",
				  rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO, why);
	} else if (run.exit_status != 0) {
		snprintf(why, sizeof(why),
			 "%s exited with status %d%s; see mpi_stderr", q,
			 run.exit_status,
			 run.exit_status == 127
				 ? " (a command was not found: is Open MPI's "
				   "mpirun installed on the launch node?)"
				 : "");
		rc = cluster_fail(m, c, "mpiexec", -EIO, why);
	} else {
		cluster_clear_error(m, c);
	}
	pthread_mutex_unlock(&m->lock);
	free(cmd);
	free(line);
	return rc;

refused:
	pthread_mutex_unlock(&m->lock);
	free(line);
	return rc;
}
