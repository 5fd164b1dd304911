#!/bin/sh
# Starts Grafana (the command given as arguments) with the gateway's provisioning: the QuestDB data
# source, the dashboards and the alert rules of this folder, and a contact point for the alerts when
# ALERT_EMAIL or ALERT_WEBHOOK_URL is set. None is set by default: alerts then show in Grafana only.
# SHIPS_SEEN_DAYS (default 30) is how long a ship that stopped reporting stays on the dashboards and
# in the silent-ship alert; it replaces the marked 30 in the dashboards' and rules' SQL.
# This folder is read-only (a mounted folder, the appliance's system partition), so the tree Grafana
# reads (GF_PATHS_PROVISIONING) is put together at every start in a writable place: links to this
# folder, the dashboards and rules with SHIPS_SEEN_DAYS written in, and the contact point file; a
# changed setting applies at the next restart.
set -eu
shipped="${HARBOR_PROVISIONING:?set HARBOR_PROVISIONING to the shipped provisioning folder}"
target="${GF_PATHS_PROVISIONING:?set GF_PATHS_PROVISIONING to where Grafana reads provisioning}"
email="${ALERT_EMAIL:-}"
webhook="${ALERT_WEBHOOK_URL:-}"
days="${SHIPS_SEEN_DAYS:-30}"

fail() {
  echo "start-grafana: $*" >&2
  exit 1
}

# One line, no control characters: the value goes into a YAML file.
check_line() {
  if [ "$(printf '%s' "$2" | tr -d '[:cntrl:]')" != "$2" ]; then fail "$1 must be one line without control characters"; fi
}
check_line ALERT_EMAIL "$email"
check_line ALERT_WEBHOOK_URL "$webhook"
case "$email" in '' | ?*@?*) ;; *) fail "ALERT_EMAIL must be e-mail addresses (name@example.com), separated by ; or ," ;; esac
case "$webhook" in '' | http://?* | https://?*) ;; *) fail "ALERT_WEBHOOK_URL must start with http:// or https://" ;; esac
case "$days" in '' | *[!0-9]* | 0*) fail "SHIPS_SEEN_DAYS must be a whole number of days from 1 to 3650" ;; esac
[ "$days" -le 3650 ] || fail "SHIPS_SEEN_DAYS must be a whole number of days from 1 to 3650"

# A single-quoted YAML scalar; $ doubled because Grafana expands $NAME in provisioning files.
yaml_quote() {
  printf "'%s'" "$(printf '%s' "$1" | sed -e "s/'/''/g" -e 's/\$/$$/g')"
}

# The window of "ships seen", marked in the SQL as `-30 /* SHIPS_SEEN_DAYS */`.
with_days() {
  sed "s|-30 /\* SHIPS_SEEN_DAYS \*/|-$days /* SHIPS_SEEN_DAYS */|g" "$1" > "$2"
}

mkdir -p "$target"
rm -rf "$target/alerting" "$target/dashboards"
rm -f "$target/datasources"
ln -s "$shipped/datasources" "$target/datasources"
mkdir -p "$target/dashboards/harbor" "$target/alerting"
for provider in "$shipped"/dashboards/*.yaml; do ln -s "$provider" "$target/dashboards/"; done
for dashboard in "$shipped"/dashboards/harbor/*.json; do with_days "$dashboard" "$target/dashboards/harbor/${dashboard##*/}"; done
for rules in "$shipped"/alerting/*.yaml; do with_days "$rules" "$target/alerting/${rules##*/}"; done

if [ -n "$email$webhook" ]; then
  {
    echo '# Written by start-grafana.sh from ALERT_EMAIL and ALERT_WEBHOOK_URL at every start.'
    echo 'apiVersion: 1'
    echo 'contactPoints:'
    echo '  - orgId: 1'
    echo '    name: Harbor alerts'
    echo '    receivers:'
    if [ -n "$email" ]; then
      echo '      - uid: harbor-alerts-email'
      echo '        type: email'
      echo '        settings:'
      echo "          addresses: $(yaml_quote "$email")"
      echo '          singleEmail: true'
    fi
    if [ -n "$webhook" ]; then
      echo '      - uid: harbor-alerts-webhook'
      echo '        type: webhook'
      echo '        settings:'
      echo "          url: $(yaml_quote "$webhook")"
      echo '          httpMethod: POST'
    fi
    echo 'policies:'
    echo '  - orgId: 1'
    echo '    receiver: Harbor alerts'
    echo '    group_by: [grafana_folder, alertname]'
    echo '    group_wait: 30s'
    echo '    group_interval: 5m'
    echo '    repeat_interval: 4h'
  } > "$target/alerting/contact-points.yaml"
fi

exec "$@"
