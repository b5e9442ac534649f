#!/usr/bin/env bash
# Start one Apache Kafka broker in KRaft mode (broker and controller in one process, no ZooKeeper) on 127.0.0.1,
# from Maven Central artifacts, and wait until it serves clients.
#
#   scripts/kafka_start.sh            broker on 127.0.0.1:$CTCALC_KAFKA_PORT (9092), data in $CTCALC_KAFKA_DIR
#   scripts/kafka_start.sh fetch      only fetch the jars into the cache (nothing is fetched when they are there)
#
# The jars (scripts/kafka/pom.xml and its dependencies) are copied by Maven into $KAFKA_LIBS under the user's cache
# folder once; later starts fetch nothing. A data folder that is already formatted is started as it is (a restart
# keeps its topics and offsets). Stop with scripts/kafka_stop.sh. Settings: scripts/kafka_env.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=kafka_env.sh
. "$HERE/kafka_env.sh"

fetch() {  # the classpath, once per pom: a stamp holds the pom's hash
  local want stamp="$KAFKA_LIBS/.pom-sha256"
  want=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  if ! command -v mvn >/dev/null; then
    echo "kafka_start: Maven (mvn) is needed once to fetch the broker's jars: apt-get install maven" >&2; exit 1
  fi
  echo "kafka_start: fetching Kafka $KAFKA_VERSION jars into $KAFKA_LIBS (once)" >&2
  rm -rf "$KAFKA_LIBS"
  mvn -q -B -Dstyle.color=never -f "$HERE/kafka/pom.xml" -Dmaven.repo.local="$KAFKA_M2" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS" >&2
  echo "$want" >"$stamp"
}

fetch
[ "${1:-}" = fetch ] && exit 0
if ! command -v java >/dev/null; then
  echo "kafka_start: Java 17 is needed to run the broker and was not found on PATH" >&2; exit 1
fi

D=$CTCALC_KAFKA_DIR
mkdir -p "$D/data"
if [ -f "$D/kafka.pid" ] && kill -0 "$(cat "$D/kafka.pid")" 2>/dev/null; then
  echo "kafka_start: a broker already runs from $D (PID $(cat "$D/kafka.pid")); scripts/kafka_stop.sh first" >&2
  exit 1
fi
cat >"$D/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CTCALC_KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$CTCALC_KAFKA_PORT,CONTROLLER://127.0.0.1:$CTCALC_KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$CTCALC_KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$D/data
num.partitions=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.retention.check.interval.ms=1000
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
PROPS
cat >"$D/log4j2.properties" <<PROPS
appender.file.type=File
appender.file.name=file
appender.file.fileName=$D/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.state.name=state.change.logger
logger.state.level=WARN
PROPS
JAVA=(java "-Xmx$CTCALC_KAFKA_HEAP" "-Xms128m" -XX:+UseG1GC -XX:ActiveProcessorCount=2 -Djava.awt.headless=true
      "-Dlog4j2.configurationFile=$D/log4j2.properties" -cp "$KAFKA_LIBS/*")
if [ ! -f "$D/data/meta.properties" ]; then  # a new data folder: KRaft needs it formatted with a cluster id
  cluster_id=$(python3 -c "import base64, uuid; print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22])")
  "${JAVA[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$D/server.properties" >"$D/format.log" 2>&1 || {
    echo "kafka_start: formatting $D/data failed:" >&2; tail -5 "$D/format.log" >&2; exit 1; }
fi
: >"$D/server.log"
nohup "${JAVA[@]}" kafka.Kafka "$D/server.properties" >"$D/stdout.log" 2>&1 &
echo $! >"$D/kafka.pid"
deadline=$((SECONDS + CTCALC_KAFKA_WAIT_S))
until grep -q "Kafka Server started" "$D/server.log" 2>/dev/null; do
  if ! kill -0 "$(cat "$D/kafka.pid")" 2>/dev/null; then
    echo "kafka_start: the broker exited during start; last lines of $D/server.log and stdout.log:" >&2
    tail -5 "$D/server.log" "$D/stdout.log" >&2; rm -f "$D/kafka.pid"; exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "kafka_start: the broker did not start within ${CTCALC_KAFKA_WAIT_S}s (PID $(cat "$D/kafka.pid"));" \
      "see $D/server.log" >&2
    exit 1
  fi
  sleep 0.3
done
echo "kafka_start: Kafka $KAFKA_VERSION (KRaft) on 127.0.0.1:$CTCALC_KAFKA_PORT, PID $(cat "$D/kafka.pid")," \
  "data in $D" >&2
