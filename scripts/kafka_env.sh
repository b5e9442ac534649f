# Sourced by scripts/kafka_start.sh and kafka_stop.sh: where the broker's jars are cached and where one broker keeps
# its data, log and PID. Override any of these in the environment.
KAFKA_POM=$(dirname "${BASH_SOURCE[0]}")/kafka/pom.xml
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM")
CTCALC_CACHE=${CTCALC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctcalc}
KAFKA_LIBS=${KAFKA_LIBS:-$CTCALC_CACHE/kafka-$KAFKA_VERSION/libs}    # the broker's classpath (Maven artifacts)
KAFKA_M2=${KAFKA_M2:-$CTCALC_CACHE/m2}                               # Maven's local repository for the fetch
CTCALC_KAFKA_DIR=${CTCALC_KAFKA_DIR:-${TMPDIR:-/tmp}/ctcalc-kafka}   # data (KRaft metadata, topics), log, PID
CTCALC_KAFKA_PORT=${CTCALC_KAFKA_PORT:-9092}                        # clients: 127.0.0.1:<port>
CTCALC_KAFKA_CONTROLLER_PORT=${CTCALC_KAFKA_CONTROLLER_PORT:-$((CTCALC_KAFKA_PORT + 1))}
CTCALC_KAFKA_HEAP=${CTCALC_KAFKA_HEAP:-512m}
CTCALC_KAFKA_WAIT_S=${CTCALC_KAFKA_WAIT_S:-120}
