# isolab service stack `wordpress`, component `web`: php-fpm and nginx as one
# foreground process (the component's command is `sh @workdir@/web/run.sh`).
# SIGTERM, SIGINT or SIGHUP to this shell stops both; when nginx exits,
# php-fpm is stopped too, and the shell exits with nginx's status.
php-fpm8.2 --nodaemonize --allow-to-run-as-root --fpm-config @workdir@/web/php-fpm.conf &
fpm=$!
nginx -e stderr -c @workdir@/web/nginx.conf -g 'daemon off;' &
web=$!
trap 'kill -TERM $fpm $web 2>/dev/null' TERM INT HUP
wait $web
status=$?
kill -TERM $fpm 2>/dev/null
wait $web
wait $fpm
rm -f /tmp/isolab-php-fpm-@port@.sock
exit $status
