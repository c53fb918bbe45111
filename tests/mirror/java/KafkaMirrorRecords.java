// The records of MM2's internal topics as Kafka writes them: the schemas of Kafka's
// OffsetSync, Checkpoint and Heartbeat (connect/mirror, connect/mirror-client) serialized
// with kafka-clients' own Schema and Struct, printed as hex for test_kafka_formats.py.
import java.nio.ByteBuffer;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.Type;

public class KafkaMirrorRecords {
    static final Schema HEADER = new Schema(new Field("version", Type.INT16));


    static byte[] write(Schema schema, Struct struct) {
        ByteBuffer buffer = ByteBuffer.allocate(schema.sizeOf(struct));
        schema.write(buffer, struct);
        return buffer.array();
    }

    static byte[] versioned(Schema schema, Struct struct) {
        Struct header = new Struct(HEADER).set("version", (short) 0);
        byte[] h = write(HEADER, header);
        byte[] v = write(schema, struct);
        byte[] all = new byte[h.length + v.length];
        System.arraycopy(h, 0, all, 0, h.length);
        System.arraycopy(v, 0, all, h.length, v.length);
        return all;
    }

    static void print(String name, byte[] bytes) {
        StringBuilder sb = new StringBuilder(name).append(' ');
        for (byte b : bytes) sb.append(String.format("%02x", b));
        System.out.println(sb);
    }

    public static void main(String[] args) {
        Schema syncKey = new Schema(new Field("topic", Type.STRING), new Field("partition", Type.INT32));
        Schema syncValue = new Schema(new Field("upstreamOffset", Type.INT64), new Field("offset", Type.INT64));
        print("offset_sync_key", write(syncKey, new Struct(syncKey).set("topic", "orders").set("partition", 1)));
        print("offset_sync_value", write(syncValue, new Struct(syncValue).set("upstreamOffset", 99L).set("offset", 98L)));

        Schema cpKey = new Schema(new Field("group", Type.STRING), new Field("topic", Type.STRING),
            new Field("partition", Type.INT32));
        Schema cpValue = new Schema(new Field("upstreamOffset", Type.INT64), new Field("offset", Type.INT64),
            new Field("metadata", Type.STRING));
        print("checkpoint_key", write(cpKey, new Struct(cpKey).set("group", "app").set("topic", "A.orders")
            .set("partition", 2)));
        print("checkpoint_value", versioned(cpValue, new Struct(cpValue).set("upstreamOffset", 130L)
            .set("offset", 123L).set("metadata", "m\u20ac")));

        Schema hbKey = new Schema(new Field("sourceClusterAlias", Type.STRING),
            new Field("targetClusterAlias", Type.STRING));
        Schema hbValue = new Schema(new Field("timestamp", Type.INT64));
        print("heartbeat_key", write(hbKey, new Struct(hbKey).set("sourceClusterAlias", "A")
            .set("targetClusterAlias", "B")));
        print("heartbeat_value", versioned(hbValue, new Struct(hbValue).set("timestamp", 1700000000000L)));
    }
}
