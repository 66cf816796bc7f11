export default function TagList({ tags }: { tags: string[] }) {
  return (
    <ul aria-label="Tags">
      {tags.map((tag, index) => (
        <li key={index}>{tag}</li>
      ))}
    </ul>
  );
}
