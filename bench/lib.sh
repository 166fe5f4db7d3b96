# Shared by the bench scripts that start a server and drive it with wrk
# (bench/wrk.sh, bench/neighbour.sh). Source it after setting $dir (a
# temporary directory the caller removes).

server=

# Starts "$@" in the background (its output in $dir/server.log) and waits
# until 127.0.0.1:$port accepts, for at most 20 s.
start_server() {
  "$@" >"$dir/server.log" 2>&1 &
  server=$!
  for _ in $(seq 400); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "the server did not listen on $port:" >&2
  cat "$dir/server.log" >&2
  exit 1
}

# Stops the server start_server started, if it runs.
stop_server() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  server=
}
