# isolab's Cassandra 5.0 start: the daemon in the foreground on Debian's OpenJDK 17,
# with the jars of the `cassandra` asset, cassandra.yaml and logback.xml of this
# directory, and the Java 17 options of Apache's conf/jvm17-server.options.
# Arguments: the working directory, the native (CQL) port, the shape's memory in MiB.
set -e
dir=$1
port=$2
memory=$3
java=${ISOLAB_JAVA:-java}
if ! command -v "$java" >/dev/null 2>&1; then
    echo "cassandra: no java: apt-get install openjdk-17-jre-headless" >&2
    exit 1
fi
# The heap as Apache's cassandra-env.sh sizes it from the memory: max(min(1/2, 1 GiB),
# min(1/4, 8 GiB)); 512 MiB in a 1 GiB shape.
half=$((memory / 2)); [ "$half" -gt 1024 ] && half=1024
quarter=$((memory / 4)); [ "$quarter" -gt 8192 ] && quarter=8192
heap=$half; [ "$quarter" -gt "$heap" ] && heap=$quarter
# HotSpot prints its own fatal messages (an OutOfMemoryError it exits on) on stdout:
# everything goes to stderr, the end of which a failed start shows.
exec 1>&2
mkdir -p "$dir/db/data" "$dir/db/commitlog" "$dir/db/saved_caches" "$dir/db/hints" \
    "$dir/db/cdc_raw" "$dir/db/logs" "$dir/db/triggers"
exec "$java" \
    -Xms${heap}m -Xmx${heap}m -Xss256k \
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 \
    -XX:G1HeapRegionSize=16m -XX:G1RSetUpdatingPauseTimePercent=5 \
    -XX:MaxGCPauseMillis=300 -XX:InitiatingHeapOccupancyPercent=70 \
    -XX:+ExitOnOutOfMemoryError \
    -XX:+PerfDisableSharedMem -XX:-UsePerfData \
    -Djava.net.preferIPv4Stack=true \
    -Djdk.attach.allowAttachSelf=true \
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED \
    --add-exports java.sql/java.sql=ALL-UNNAMED \
    --add-exports java.base/java.lang.ref=ALL-UNNAMED \
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED \
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED \
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED \
    --add-opens java.base/java.lang.module=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED \
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens java.base/java.io=ALL-UNNAMED \
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED \
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED \
    --add-opens java.base/java.lang=ALL-UNNAMED \
    --add-opens java.base/java.util=ALL-UNNAMED \
    -Dio.netty.tryReflectionSetAccessible=true \
    -Dio.netty.allocator.useCacheForAllThreads=true \
    -Dio.netty.allocator.maxOrder=11 \
    -javaagent:"$(ls "$dir"/cassandra/lib/jamm-*.jar)" \
    -Dcassandra-foreground=yes \
    -Dcassandra.config="file://$dir/db/cassandra.yaml" \
    -Dlogback.configurationFile="file://$dir/db/logback.xml" \
    -Dcassandra.logdir="$dir/db/logs" \
    -Dcassandra.storagedir="$dir/db" \
    -Dcassandra.triggers_dir="$dir/db/triggers" \
    -Dcassandra.storage_port=$((port + 1)) \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 \
    -cp "$dir/cassandra/lib/*" \
    org.apache.cassandra.service.CassandraDaemon -f
