package samsa.reference;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client against a broker, one scenario per run, for tests/reference.
 *
 * <pre>
 * java samsa.reference.Clients SCENARIO --bootstrap-server HOST:PORT [--key value ...]
 * </pre>
 *
 * Each scenario prints what the client saw, one tab-separated line per fact, for the test to
 * compare with what it expects; a client exception ends the run with exit code 1 and the
 * exception on stderr.
 */
public final class Clients {
    private static final Duration POLL = Duration.ofMillis(100);

    private final Map<String, String> args;
    private final String bootstrap;

    private Clients(Map<String, String> args) {
        this.args = args;
        this.bootstrap = need("bootstrap-server");
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            usage();
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                usage();
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        Clients clients = new Clients(args);
        switch (argv[0]) {
            case "produce" -> clients.produce();
            case "transactions" -> clients.transactions();
            case "consume" -> clients.consume();
            case "copy" -> clients.copy();
            case "admin" -> clients.adminScenario();
            case "admin-acls" -> clients.adminAcls();
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: Clients produce|transactions|consume|copy|admin|admin-acls "
                + "--bootstrap-server HOST:PORT [--key value ...]");
        System.exit(2);
    }

    private String need(String key) {
        String value = args.get(key);
        if (value == null) {
            System.err.println("missing --" + key);
            System.exit(2);
        }
        return value;
    }

    private int number(String key, int fallback) {
        String value = args.get(key);
        return value == null ? fallback : Integer.parseInt(value);
    }

    private static void out(Object... fields) {
        StringBuilder line = new StringBuilder();
        for (Object field : fields) {
            if (line.length() > 0) {
                line.append('\t');
            }
            line.append(field);
        }
        System.out.println(line);
    }

    private Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return props;
    }

    private Properties consumerProps(String group, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args.getOrDefault("protocol", "classic"));
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                StringDeserializer.class.getName());
        return props;
    }

    private Admin newAdmin() {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    /** --topic T --count N [--partition P]: an idempotent producer (acks=all, 5 in flight);
     * "acked PARTITION OFFSET KEY VALUE" for each record, in the order sent. */
    private void produce() throws Exception {
        String topic = need("topic");
        int count = number("count", 100);
        Integer partition = args.containsKey("partition") ? number("partition", 0) : null;
        Properties props = producerProps();
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "512");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(
                        new ProducerRecord<>(topic, partition, "k" + (i % 7), "v" + i)));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata meta = sent.get(i).get();
                out("acked", meta.partition(), meta.offset(), "k" + (i % 7), "v" + i);
            }
        }
    }

    /** --topic T --transactional-id X: three transactions on partition 0, the middle one
     * aborted; "committed VALUE" and "aborted VALUE" for what each held. */
    private void transactions() throws Exception {
        String topic = need("topic");
        Properties props = producerProps();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, need("transactional-id"));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            String[][] rounds = {{"commit", "a"}, {"abort", "b"}, {"commit", "c"}};
            for (String[] round : rounds) {
                producer.beginTransaction();
                List<String> values = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    String value = round[1] + i;
                    producer.send(new ProducerRecord<>(topic, 0, null, value));
                    values.add(value);
                }
                producer.flush();
                if (round[0].equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                for (String value : values) {
                    out(round[0].equals("commit") ? "committed" : "aborted", value);
                }
            }
        }
    }

    /** --topic T --group G [--isolation read_committed] [--protocol consumer]: a group member
     * (classic, or KIP-848's consumer protocol) reads every partition up to its end (the last
     * stable offset for read_committed), commits, prints "record PARTITION OFFSET VALUE" then
     * "committed PARTITION OFFSET"; with the consumer protocol then the group as the Admin
     * client describes it: "group TYPE STATE ASSIGNOR GROUP-EPOCH TARGET-EPOCH" and
     * "member EPOCH PARTITIONS TARGET-PARTITIONS" (partition lists comma-separated). */
    private void consume() throws Exception {
        String topic = need("topic");
        String isolation = args.getOrDefault("isolation", "read_uncommitted");
        long deadline = System.currentTimeMillis() + number("timeout-ms", 30000);
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerProps(need("group"), isolation))) {
            consumer.subscribe(List.of(topic));
            Map<TopicPartition, Long> ends = null;
            List<ConsumerRecord<String, String>> seen = new ArrayList<>();
            while (true) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("timed out: assignment " + consumer.assignment()
                            + ", read " + seen.size());
                    System.exit(3);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    seen.add(r);
                }
                Set<TopicPartition> assigned = consumer.assignment();
                if (assigned.isEmpty()) {
                    continue;
                }
                if (ends == null) {
                    ends = consumer.endOffsets(assigned);
                }
                boolean done = true;
                for (TopicPartition tp : assigned) {
                    if (consumer.position(tp) < ends.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
            }
            for (ConsumerRecord<String, String> r : seen) {
                out("record", r.partition(), r.offset(), r.value());
            }
            consumer.commitSync();
            Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(consumer.assignment());
            for (TopicPartition tp : new TreeMap<>(byName(committed)).values()) {
                out("committed", tp.partition(), committed.get(tp).offset());
            }
            if ("consumer".equals(args.get("protocol"))) {
                try (Admin admin = newAdmin()) {
                    String group = need("group");
                    ConsumerGroupDescription d =
                            get(admin.describeConsumerGroups(List.of(group)).describedGroups()
                                    .get(group));
                    out("group", d.type(), d.groupState(), d.partitionAssignor(),
                            d.groupEpoch().orElse(-1), d.targetAssignmentEpoch().orElse(-1));
                    for (MemberDescription m : d.members()) {
                        out("member", m.memberEpoch().orElse(-1),
                                partitions(m.assignment().topicPartitions()),
                                partitions(m.targetAssignment()
                                        .map(a -> a.topicPartitions()).orElse(Set.of())));
                    }
                }
            }
        }
    }

    private static String partitions(Set<TopicPartition> tps) {
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        StringBuilder text = new StringBuilder();
        for (Integer p : sorted) {
            text.append(text.length() > 0 ? "," : "").append(p);
        }
        return text.toString();
    }

    private static Map<String, TopicPartition> byName(Map<TopicPartition, ?> map) {
        Map<String, TopicPartition> names = new TreeMap<>();
        for (TopicPartition tp : map.keySet()) {
            names.put(String.format("%s-%05d", tp.topic(), tp.partition()), tp);
        }
        return names;
    }

    /** --input I --output O --group G --transactional-id X --count N: consume-transform-
     * produce, a read_committed member of G copies N records from I to O (upper-cased), each
     * poll's records and offsets in one transaction; "copied N". */
    private void copy() throws Exception {
        String output = need("output");
        int count = number("count", 10);
        long deadline = System.currentTimeMillis() + number("timeout-ms", 30000);
        Properties props = producerProps();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, need("transactional-id"));
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerProps(need("group"), "read_committed"));
             KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            consumer.subscribe(List.of(need("input")));
            int copied = 0;
            while (copied < count) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("timed out after copying " + copied);
                    System.exit(3);
                }
                ConsumerRecords<String, String> records = consumer.poll(POLL);
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
            }
            out("copied", copied);
        }
    }

    private static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get();
    }

    /** --prefix P: topics, configs, partitions, offsets, records and groups through the
     * Admin client, each step's result printed as a line. */
    private void adminScenario() throws Exception {
        String prefix = need("prefix");
        String topic = prefix + "-a";
        String group = prefix + "-g";
        try (Admin admin = newAdmin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            out("cluster", get(cluster.clusterId()), get(cluster.controller()).id(),
                    get(cluster.nodes()).size());

            NewTopic newTopic = new NewTopic(topic, 2, (short) 1)
                    .configs(Map.of("retention.ms", "86400000"));
            get(admin.createTopics(List.of(newTopic)).all());
            Set<String> names = new TreeSet<>(get(admin.listTopics().names()));
            out("listed", names.contains(topic));
            describeTopic(admin, topic);

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact,delete"),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", null),
                            AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "65536"),
                            AlterConfigOp.OpType.SET)))).all());
            Config config = get(admin.describeConfigs(List.of(resource)).all()).get(resource);
            for (String name : List.of("cleanup.policy", "retention.ms", "max.message.bytes")) {
                ConfigEntry entry = config.get(name);
                out("config", name, entry.value(), entry.source());
            }

            get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all());
            describeTopic(admin, topic);

            Properties props = producerProps();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, 1000L + i, "k" + i, "v" + i));
                }
                producer.flush();
            }
            TopicPartition p0 = new TopicPartition(topic, 0);
            listOffsets(admin, p0);
            long low = get(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(4)))
                    .lowWatermarks().get(p0)).lowWatermark();
            out("deleted", low);
            listOffsets(admin, p0);

            groups(admin, topic, group, p0);

            get(admin.deleteTopics(List.of(topic)).all());
            out("listed", get(admin.listTopics().names()).contains(topic));
        }
    }

    private static void describeTopic(Admin admin, String topic) throws Exception {
        TopicDescription d = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
        for (TopicPartitionInfo p : d.partitions()) {
            out("partition", d.name(), p.partition(), p.leader().id(), nodeIds(p.replicas()),
                    nodeIds(p.isr()));
        }
    }

    private static String nodeIds(List<Node> nodes) {
        List<String> ids = new ArrayList<>();
        for (Node node : nodes) {
            ids.add(Integer.toString(node.id()));
        }
        return String.join(",", ids);
    }

    private static void listOffsets(Admin admin, TopicPartition tp) throws Exception {
        Map<String, OffsetSpec> specs = new TreeMap<>(Map.of(
                "earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
                "max-timestamp", OffsetSpec.maxTimestamp(),
                "for-time", OffsetSpec.forTimestamp(1005L)));
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info =
                    get(admin.listOffsets(Map.of(tp, spec.getValue())).partitionResult(tp));
            out("offset", spec.getKey(), info.offset(), info.timestamp());
        }
    }

    private void groups(Admin admin, String topic, String group, TopicPartition p0)
            throws Exception {
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerProps(group, "read_uncommitted"))) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (consumer.assignment().isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no assignment");
                }
                consumer.poll(POLL);
            }
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(7, "seven")));
            describeGroup(admin, group);
            for (GroupListing listing : get(admin.listGroups().all())) {
                if (listing.groupId().equals(group)) {
                    out("group-listed", listing.groupId(), listing.type().map(Enum::name)
                            .orElse("-"), listing.protocol(), listing.groupState()
                            .map(Enum::name).orElse("-"));
                }
            }
        }
        describeGroup(admin, group);
        TopicPartition p1 = new TopicPartition(topic, 1);
        get(admin.alterConsumerGroupOffsets(group, Map.of(p1, new OffsetAndMetadata(0))).all());
        groupOffsets(admin, group);
        get(admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all());
        groupOffsets(admin, group);
        get(admin.deleteConsumerGroups(List.of(group)).all());
        Collection<GroupListing> left = get(admin.listGroups().all());
        boolean listed = false;
        for (GroupListing listing : left) {
            listed |= listing.groupId().equals(group);
        }
        out("group-listed", group, listed);
    }

    private static void describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d =
                get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
        out("group", d.groupId(), d.groupState(), d.type(), d.partitionAssignor(),
                d.isSimpleConsumerGroup(), d.members().size(), d.coordinator().id());
        for (MemberDescription m : d.members()) {
            List<String> assigned = new ArrayList<>();
            for (TopicPartition tp : byName(toMap(m.assignment().topicPartitions())).values()) {
                assigned.add(tp.toString());
            }
            out("member", m.clientId().isEmpty() ? "-" : "client", String.join(",", assigned));
        }
    }

    private static Map<TopicPartition, Boolean> toMap(Set<TopicPartition> set) {
        Map<TopicPartition, Boolean> map = new HashMap<>();
        for (TopicPartition tp : set) {
            map.put(tp, true);
        }
        return map;
    }

    private static void groupOffsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        List<String> shown = new ArrayList<>();
        for (TopicPartition tp : byName(offsets).values()) {
            OffsetAndMetadata o = offsets.get(tp);
            shown.add(tp + "=" + o.offset() + "/" + o.metadata());
        }
        out("group-offsets", String.join(",", shown));
    }

    /** --prefix P: CreateAcls, DescribeAcls with filters and DeleteAcls through the Admin
     * client (the broker needs an authorizer). */
    private void adminAcls() throws Exception {
        String prefix = need("prefix");
        ResourcePattern topic = new ResourcePattern(ResourceType.TOPIC, prefix + "-orders",
                PatternType.LITERAL);
        ResourcePattern groups = new ResourcePattern(ResourceType.GROUP, prefix + "-",
                PatternType.PREFIXED);
        List<AclBinding> bindings = List.of(
                new AclBinding(topic, new AccessControlEntry("User:alice", "*",
                        AclOperation.WRITE, AclPermissionType.ALLOW)),
                new AclBinding(topic, new AccessControlEntry("User:alice", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)),
                new AclBinding(topic, new AccessControlEntry("User:mallory", "10.0.0.1",
                        AclOperation.ALL, AclPermissionType.DENY)),
                new AclBinding(groups, new AccessControlEntry("User:alice", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)));
        try (Admin admin = newAdmin()) {
            get(admin.createAcls(bindings).all());
            describeAcls(admin, "all", new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY),
                    AccessControlEntryFilter.ANY), prefix);
            describeAcls(admin, "topic", new AclBindingFilter(topic.toFilter(),
                    AccessControlEntryFilter.ANY), prefix);
            describeAcls(admin, "match-group", new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.GROUP, prefix + "-consumers",
                            PatternType.MATCH), AccessControlEntryFilter.ANY), prefix);
            describeAcls(admin, "alice-read", new AclBindingFilter(
                    ResourcePatternFilter.ANY, new AccessControlEntryFilter("User:alice", null,
                            AclOperation.READ, AclPermissionType.ANY)), prefix);
            Collection<AclBinding> deleted = get(admin.deleteAcls(List.of(new AclBindingFilter(
                    topic.toFilter(), new AccessControlEntryFilter("User:alice", null,
                            AclOperation.ANY, AclPermissionType.ALLOW)))).all());
            out("deleted", deleted.size());
            describeAcls(admin, "all", new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY),
                    AccessControlEntryFilter.ANY), prefix);
        }
    }

    private static void describeAcls(Admin admin, String label, AclBindingFilter filter,
                                     String prefix) throws Exception {
        Set<String> shown = new TreeSet<>();
        for (AclBinding b : get(admin.describeAcls(filter).values())) {
            if (b.pattern().name().startsWith(prefix)) {
                shown.add(String.join(" ", b.pattern().resourceType().name(), b.pattern().name(),
                        b.pattern().patternType().name(), b.entry().principal(),
                        b.entry().host(), b.entry().operation().name(),
                        b.entry().permissionType().name()));
            }
        }
        for (String acl : shown) {
            out("acl", label, acl);
        }
        if (shown.isEmpty()) {
            out("acl", label, "none");
        }
    }
}
