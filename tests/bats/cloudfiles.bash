# files/ of a cloud node (ec2, gcp): the node's working directory over SFTP
# on the instance's session, as on a hosts node (files_posix.bats runs the
# whole conformance suite there). Shell commands only.

# cloudfiles_check CLUSTER RANK: links, symbolic links, a rename over an
# existing file, a node command's changes shown at once, statfs.
cloudfiles_check() {
	local n=$MNT/clusters/$1/nodes/$2
	local d=$n/files
	printf 'one\n' >"$d/a"
	echo 'cat a' >"$n/exec"
	[ "$(cat "$n/stdout")" = one ]
	ln "$d/a" "$d/b"
	[ "$(stat -c %h "$d/a")" = 2 ]
	ln -s a "$d/s"
	[ "$(readlink "$d/s")" = a ]
	[ "$(cat "$d/s")" = one ]
	mkdir "$d/dir"
	printf 'two\n' >"$d/dir/t"
	mv "$d/dir/t" "$d/a"
	[ "$(cat "$d/a")" = two ]
	[ "$(cat "$d/b")" = one ]
	chmod 640 "$d/b"
	touch -m -d '2001-02-03 04:05:06 UTC' "$d/b"
	echo 'stat -c "%h %a %Y %F" b; readlink s; ls dir | wc -l' >"$n/exec"
	[ "$(cat "$n/stdout")" = "$(printf '1 640 981173106 regular file\na\n0')" ]
	# What a command changes shows as soon as its exec returns.
	echo 'echo three >a; echo c >c; rm b' >"$n/exec"
	[ "$(cat "$d/a")" = three ]
	[ "$(cat "$d/c")" = c ]
	[ ! -e "$d/b" ]
	[ "$(stat -f -c %b "$d")" -gt 0 ]
	rm "$d/a" "$d/c" "$d/s"
	rmdir "$d/dir"
	echo 'ls -d a c s dir 2>/dev/null | wc -l' >"$n/exec"
	[ "$(cat "$n/stdout")" = 0 ]
}

# cloudfiles_kept CLUSTER RANK: a file written through files/ is out of
# reach while the cluster is interrupted, and there again, read and written
# on both sides, once it is resumed (the instance on a new address).
cloudfiles_kept() {
	local n=$MNT/clusters/$1/nodes/$2
	local before
	before=$(sed -n 's/^address: //p' "$n/status")
	printf 'kept\n' >"$n/files/k"
	echo interrupted >"$MNT/clusters/$1/state"
	wait_state "$1" interrupted
	run cat "$n/files/k"
	[ "$status" -ne 0 ]
	echo resumed >"$MNT/clusters/$1/state"
	wait_state "$1" running
	[ "$(sed -n 's/^address: //p' "$n/status")" != "$before" ]
	[ "$(cat "$n/files/k")" = kept ]
	printf 'again\n' >>"$n/files/k"
	echo 'cat k' >"$n/exec"
	[ "$(cat "$n/stdout")" = "$(printf 'kept\nagain')" ]
	rm "$n/files/k"
}
